/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/base/duration.h — parsing a duration, shared by the mount
 * options (config/) and the agent profiles (spawn/): base, so that neither
 * reaches into the other for it.
 */
#ifndef FLEETFS_DURATION_H
#define FLEETFS_DURATION_H

#include <stdint.h>

#define DURATION_MAX_MS (3650LL * 24 * 3600 * 1000) /* ten years */

/* "1.5s", "500ms", "2m", "7d"; a bare number is seconds.  0 and *ms (rounded
 * to the nearest millisecond), or -1: not a duration, under 1 ms or at
 * least DURATION_MAX_MS. */
int parse_duration(const char *s, int64_t *ms);

#endif
