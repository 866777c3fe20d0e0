/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/agents/agents.h — this host's agents and the fleet's groups, as the
 * tree and the heartbeat see them (SPEC section 10).
 *
 * A local agent is the same kind of entity as the lead: a mailbox of the
 * model (mb_agent_new), consumed as a box of the broker connection
 * (agent.<gid>.inbox, bound to fleet.msg with its gid, broadcast.all and
 * broadcast.<g> for each of its groups), typed into its own pane by a slot
 * of the injector, and listed in this host's heartbeat.  Agents come from
 * the options at start (agents=, [agent NAME]) and from
 * `mkdir agents/<name>@<me>` at run time; `rmdir` retires one whose
 * mailbox is empty.  Remote agents and groups are what presence heard.
 *
 * Threads: ag_start before the broker thread runs; ag_serve once the
 * injector runs; the rest on FUSE threads and the notifier.  One lock
 * (agents.lock) makes registering and retiring one step each.
 */
#ifndef FLEETFS_AGENTS_H
#define FLEETFS_AGENTS_H

#include <stdbool.h>

#include <glib.h>

#include "fleetfs/config/options.h"
#include "fleetfs/inject/inject.h"
#include "fleetfs/model/mailbox.h"
#include "fleetfs/presence/presence.h"

typedef struct ag_registry ag_registry;

/* The agents' part, with what it uses and nothing else: the options, the
 * lead's mailbox (the model: every entity's mailbox, and through its seam
 * the broker boxes), presence (NULL: off) and where the injector is once
 * it runs (*inj read atomically; NULL: none).  ag_free after the broker
 * thread and the FUSE loop have stopped. */
ag_registry *ag_new(const fs_opts *o, mailbox *lead, presence *pr, injector **inj);
void ag_free(ag_registry *ag);

/* The configured agents: their mailboxes and broker boxes.  -1 and *err. */
int ag_start(ag_registry *ag, char **err);
/* Their injector slots and the heartbeat's list (after inj_start). */
void ag_serve(ag_registry *ag);
/* Register agents/<gid> (a local one) / retire it: 0 or an errno. */
int ag_mkdir(ag_registry *ag, const char *gid);
int ag_rmdir(ag_registry *ag, const char *gid);
/* gid is an agent presence knows of: heard in a heartbeat, or one of ours
 * that our heartbeat announces.  A caller that already asked the model for
 * a local one (mb_find) asks only this. */
bool ag_heard(const ag_registry *ag, const char *gid);
/* An agent this host started for a remote lead (fleetfs/spawn/spawnd.c):
 * registered like mkdir (its mailbox, box, bindings, heartbeat), its
 * injector slot pinned to pane (the id the spawn ledger recorded).  0, or
 * -1 and *err (g_free). */
int ag_spawned(ag_registry *ag, const char *name, const char *pane, char **err);
/* An agent about to start in a sandbox, which binds its home agents/<gid>/
 * when it starts: registered (mailbox, box, bindings) but not yet typed
 * into or announced; ag_spawned then serves it in its pane, ag_retire
 * undoes it.  0, or -1 and *err (g_free). */
int ag_prepare(ag_registry *ag, const char *name, char **err);
/* Retire a local agent whatever waits in its mailbox (a stopped one): its
 * injector slot goes, its broker box is removed (the queue deleted when
 * empty, else unbound and kept with what waits in it), and the heartbeat
 * no longer lists it.  0, or -1 with detail (it is retired all the same). */
int ag_retire(ag_registry *ag, const char *gid, char *detail, size_t n);
/* g is `all`, configured here, or heard. */
bool ag_group_known(const ag_registry *ag, const char *g);
/* Every agent known (local and heard), sorted; g_strfreev. */
char **ag_list(const ag_registry *ag);
/* Every group known, `all` included, sorted; g_strfreev. */
char **ag_groups(const ag_registry *ag);
/* The ids in group g (coord_ids and gids), sorted; g_strfreev. */
char **ag_members(const ag_registry *ag, const char *g);
/* groups/<g>/members: one id per line. */
GString *ag_members_text(const ag_registry *ag, const char *g);
/* The lead's keys on fleet.msg: broadcast.all and broadcast.<g> of its
 * groups (g_strfreev). */
char **ag_lead_keys(const fs_opts *o);
/* Tell presence what our heartbeat says of our entities: the lead's groups
 * and every local agent that is reachable (its mailbox bound and consumed
 * here; one that is not yet, or no longer, is left out).  Once a second,
 * and after each change. */
void ag_announce(ag_registry *ag);

#endif
