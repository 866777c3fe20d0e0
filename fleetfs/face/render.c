/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/face/render.c — what a readable node holds (its snapshot, taken
 * at open and for a stat's size) and its mtime: the part of the tree that
 * asks the parts for text, out of tree.c, which answers the kernel.
 */
#include "fleetfs/face/tree_int.h"

#include "fleetfs/agents/agents.h"
#include "fleetfs/face/claims.h"
#include "fleetfs/face/hosts.h"
#include "fleetfs/face/status.h"

GString *tr_render(fleet *f, const node *n, bool fresh)
{
    switch (n->k) {
    case N_README:
        return g_string_new(st_readme());
    case N_STATUS:
        return st_root(f);
    case N_SENT:
        return mb_render(n->home, MB_SENT);
    case N_HISTORY:
        return mb_render(n->home, MB_HISTORY);
    case N_LSTATUS:
        return st_lead(f, fresh);
    case N_PSTATUS:
        return st_peer(f, n->name, fresh);
    case N_ASTATUS:
        return st_agent(f, n->name, fresh);
    case N_GMEMBERS:
        return ag_members_text(f->ag, n->name);
    case N_ROSTER:
        return st_roster(f);
    case N_CENSUS: {
        char *t = f->pr ? pr_census_text(f->pr) : g_strdup("");
        GString *g = g_string_new(t);
        g_free(t);
        return g;
    }
    case N_HSTATUS:
        return hs_status(f, n->name);
    case N_HSPAWNS:
        return hs_spawns(f, n->name);
    case N_CHOLDER:
        return cl_render(f->cl, n->name, n->home ? mb_id(n->home) : NULL);
    default:
        return g_string_new(NULL);
    }
}

int64_t tr_mtime(const node *n)
{
    switch (n->k) {
    case N_INBOX:
        return mb_mtime(n->home, MB_INBOX);
    case N_SENT:
        return mb_mtime(n->home, MB_SENT);
    case N_HISTORY:
        return mb_mtime(n->home, MB_HISTORY);
    default:
        return env_now_ms();
    }
}
