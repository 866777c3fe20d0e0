/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/mcp/claim.h — claims through the mount's claims/ directory, as
 * `fleetfs claim` and the fleet_claim, fleet_release and fleet_claims
 * tools do it (claim.c; doc/claims.md). */
#ifndef FLEETFS_MCP_CLAIM_H
#define FLEETFS_MCP_CLAIM_H

#include <jansson.h>

/* Take name in dir (<mnt>/claims, or an agent's <mnt>/agents/<gid>/claims):
 * mkdir dir/NAME (lease_s > 0: then write it to its lease, which also
 * renews a claim already ours); on EEXIST wait up to
 * wait_ms for its release (inotify on claims/, and a retry every second
 * for a release missed between two tries) and try again.  0, and
 * *holder (json_decref) the claim's holder file; or the errno of the last
 * mkdir (EEXIST: still held by another when wait_ms ran out). */
int mcp_claim_take(const char *dir, const char *name, int wait_ms, const char *note, int lease_s,
                   json_t **holder);

/* The MCP tools' table entries, appended to tools.c's table (tools_int.h
 * gives the handlers their context). */
json_t *mt_claim(void *ctx, json_t *args);
json_t *mt_release(void *ctx, json_t *args);
json_t *mt_claims(void *ctx, json_t *args);
#define MCP_CLAIM_MAX_WAIT 600
#define MCP_CLAIM_MAX_WAIT_S "600"
#define MCP_CLAIM_NAME_SCHEMA                                                                \
    "{\"type\":\"string\",\"pattern\":\"^[a-z0-9][a-z0-9_-]{0,62}$\",\"description\":\"the " \
    "claim's name: [a-z0-9] then up to 62 of [a-z0-9_-], like a peer name\"}"
#define MCP_CLAIM_DESC                                                                      \
    "Take NAME for this host across the whole fleet, as `mkdir <mount>/claims/NAME` does "  \
    "(with --as <gid>: for that agent, as <mount>/agents/<gid>/claims/NAME, and the "       \
    "record's agent names it), waiting up to `wait` seconds for its release: exactly one "  \
    "taker gets it, the others are told who holds it, and the result is the holder record " \
    "with its fencing token, a number that grows with every grant of NAME, which whatever " \
    "you guard should check (refuse one smaller than the largest seen). It is a lease, "    \
    "not a consensus lock (doc/claims.md): held while the mount's broker connection "       \
    "lives, and with lease (seconds) until that time passes unless fleet_claim renews it; " \
    "when it is lost, or the lead releases an agent's claim, that agent gets a message "    \
    "from the lead in its inbox (fleet_inbox) and must stop acting on it; fleet_release "   \
    "releases it."
#define MCP_CLAIM_SCHEMA                                                                  \
    "{\"type\":\"object\",\"properties\":{\"name\":" MCP_CLAIM_NAME_SCHEMA ","            \
    "\"wait\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":" MCP_CLAIM_MAX_WAIT_S      \
    ",\"default\":0,\"description\":\"seconds to wait for a held claim's release\"},"     \
    "\"note\":{\"type\":\"string\",\"maxLength\":1024,\"description\":\"what you do "     \
    "with it, shown to every host\"},\"lease\":{\"type\":\"integer\",\"minimum\":1,"      \
    "\"maximum\":86400,\"description\":\"seconds: given up unless fleet_claim renews it " \
    "within that time (a claim you hold is renewed)\"}},\"required\":[\"name\"],"         \
    "\"additionalProperties\":false}"
#define MCP_RELEASE_DESC                                                                    \
    "Release NAME, which you hold (fleet_claim), as `rmdir <mount>/claims/NAME` does "      \
    "(with --as: <mount>/agents/<gid>/claims/NAME). Only its holder releases a claim, and " \
    "the lead also its own agents' claims (the agent is told by a message); any other is "  \
    "refused with an error saying so."
#define MCP_RELEASE_SCHEMA                                                      \
    "{\"type\":\"object\",\"properties\":{\"name\":" MCP_CLAIM_NAME_SCHEMA "}," \
    "\"required\":[\"name\"],\"additionalProperties\":false}"
#define MCP_CLAIMS_DESC                                                                  \
    "List the claims the fleet holds now (as <mount>/claims/ lists them): each one's "   \
    "name, holder (a lead's coord_id; null while not heard yet), agent (the gid of the " \
    "agent that took it, else null), host, since, token, note and mine (held by this "   \
    "host, or with --as by that agent). At most 1000 are returned; `more` says whether " \
    "there were more."
#define MCP_CLAIM_TOOLS                                                                          \
    {"fleet_claim",  "Claim a name for the whole fleet (a lease)",                               \
     MCP_CLAIM_DESC, MCP_CLAIM_SCHEMA,                                                           \
     WRITES,         mt_claim},                                                                  \
        {"fleet_release",  "Release a claim you hold",                                           \
         MCP_RELEASE_DESC, MCP_RELEASE_SCHEMA,                                                   \
         DESTROYS,         mt_release},                                                          \
    {                                                                                            \
        "fleet_claims", "List the fleet's claims", MCP_CLAIMS_DESC,                              \
            "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}", READ_ONLY, \
            mt_claims                                                                            \
    }

/* `fleetfs claim [MOUNTPOINT] NAME [--wait SECONDS] [--note TEXT]`:
 * argv[1] is "claim"; the exit code (doc/fleetfs.1). */
int mcp_claim_main(int argc, char **argv);

#endif
