/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/face/status.h — the `key: value` status files and the tree's README.
 *
 * fresh=true may ask the broker (bounded by probe_timeout, answers cached
 * for at most 1 s): used at open().  fresh=false uses only what is cached:
 * used by getattr and the notifier, which must never wait on the broker.
 */
#ifndef FLEETFS_STATUS_H
#define FLEETFS_STATUS_H

#include <glib.h>

#include "fleetfs/face/fleet.h"

GString *st_root(fleet *f);
GString *st_lead(fleet *f, bool fresh);
GString *st_peer(fleet *f, const char *peer, bool fresh);
GString *st_agent(fleet *f, const char *gid, bool fresh);
const char *st_readme(void);
/* The `roster` file: one JSON line per known lead (doc/presence.md). */
GString *st_roster(fleet *f);

/* Ask the broker about lead id's mailbox without waiting for the answer
 * (it lands in the probe cache; answers younger than a second are reused);
 * used by the notifier's tick. */
void st_probe(fleet *f, const char *id);

#endif
