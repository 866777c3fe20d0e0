/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/presence/pr_int.h — what the presence table's files share and
 * nobody else sees: the table's entries (pr_lead, pr_agent), the table
 * itself (struct presence), the notes a change leaves for watchers, and the
 * helpers more than one of them calls.  The files:
 *   presence.c   the table: pr_new, pr_free
 *   common.c     the bottom, calling none of the others: the clock, an
 *                entry made or freed, sorted lists, notes for watchers
 *                and their delivery, words (an age, a state, text cut plain)
 *   heartbeat.c  our heartbeat: its body and the interval policy
 *   receive.c    heartbeats in: judging, verifying, taking, staleness
 *   view.c       reading: peers, roster, a lead's liveness, the link
 *   groups.c     agents and groups (SPEC section 10) and hosts (section 11):
 *                the local set, the snapshots and their diff
 *   scope.c      whom we hear with fleet_view=groups: the lists to bind, the
 *                addressed leads, which heard leads are still in view, and
 *                so a lead's state (live or stale)
 *   census.c     hearing the whole fleet for a while or for good: the
 *                fleet_view=auto rule (wide while we hear at most
 *                view_limit leads) and the census (a write to census)
 * Every function here that ends in _locked wants pr->lock held.
 */
#ifndef FLEETFS_PR_INT_H
#define FLEETFS_PR_INT_H

#include "fleetfs/presence/presence.h"

#include <glib.h>

#include "fleetfs/wire/envelope.h"
#include "fleetfs/wire/names.h"
#include "fleetfs/wire/sign.h"

#define PR_STALE_AFTER 3  /* intervals */
#define PR_LOGGED_MAX 256 /* senders whose rejection we remember having logged */

_Static_assert(ENV_HB_MAX_GROUPS == OPTS_MAX_GROUPS, "a heartbeat must carry every group groups= "
                                                     "allows");

/* An agent as a heartbeat (or pr_set_local) gave it. */
typedef struct {
    char gid[GID_MAX_LEN + 1];
    char state[ENV_HB_STATE_LEN];
    char **groups; /* sorted, NULL-terminated */
} pr_agent;

typedef struct {
    char id[64];
    bool configured, self;
    bool heard;          /* a heartbeat was believed */
    int64_t heard_mono;  /* when (monotonic ms) */
    int64_t sent_ms;     /* its sentAt (wall ms): later ones must be newer */
    int64_t interval_ms; /* the sender's */
    int64_t group_iv_ms; /* its group interval (groupInterval), interval_ms when none */
    bool left;
    bool addressed;          /* fleet_view=groups: sent to, heard from or looked up */
    int64_t addressed_mono;  /* when last (monotonic ms) */
    int64_t addressed_since; /* when this spell of being addressed began (monotonic ms) */
    bool listed;             /* in peers/ (announced to directory watchers) */
    pr_state shown;          /* what watchers were last told */
    char host[256], version[64], agent[256], started_at[40], last_at[40];
    /* the agents extension of its last believed heartbeat */
    bool ext;
    char ext_started[40]; /* startedAt of the run that sent a verified one */
    char **groups;        /* the lead's, sorted; NULL none */
    GPtrArray *agents;    /* pr_agent*, sorted by gid; NULL none */
    /* the profiles extension (SPEC section 11): what it offers, sorted;
     * NULL: unknown (never heard, or a fleetfs before profiles) */
    char **profiles;
} pr_lead;

struct presence {
    GMutex lock;
    const fs_opts *o;
    pr_hooks hooks;
    char host[256];
    char started_at[40];
    sig_key *key;     /* NULL with insecure */
    sig_trust *trust; /* follows the directory (sig_trust_refresh) */
    int64_t trust_stamp;
    int64_t trust_checked;
    GHashTable *leads;  /* id -> pr_lead* */
    GHashTable *logged; /* sender -> 1: its rejection was logged */
    uint64_t rejected;
    uint64_t ignored; /* too old, from the future, or a replay */
    bool link_up;
    bool link_tried;    /* the roster thread reported once: up, or a failure */
    int64_t link_since; /* monotonic ms */
    char *agent_sent;   /* agent words of our last heartbeat */
    /* agents and groups */
    char **local_groups;     /* the lead's, sorted */
    GPtrArray *local_agents; /* pr_agent*, sorted by gid */
    char *local_key;         /* the local set in one string, to see changes */
    uint64_t local_gen;      /* bumped when the local set changes */
    uint64_t local_sent_gen; /* what our last heartbeat carried */
    uint64_t rejected_agents;
    GHashTable *logged_agents; /* sender -> 1: its foreign agents were logged */
    bool shed_logged;
    GHashTable *snap_agents; /* gid -> description, as watchers last saw it */
    GHashTable *snap_groups; /* group -> members, likewise */
    int64_t interval_ms;     /* our last heartbeat's (pri_interval_locked) */
    int64_t group_iv_ms;     /* our last heartbeat's group interval (pri_group_iv_locked) */
    int64_t group_iv_logged; /* the one the log said last; 0: every heartbeat */
    GHashTable *absent;      /* fleet_view=groups: id -> monotonic ms its mailbox was absent */
    /* census.c: hearing the whole fleet (roster.#) though scoped */
    bool narrowed;           /* fleet_view=auto heard more than view_limit: as groups */
    bool whole;              /* pr_whole_fleet: auto never narrows */
    char narrowed_at[40];    /* when auto narrowed (wall clock), "" never */
    unsigned narrowed_heard; /* the leads heard then */
    bool census_on;          /* a census is hearing the whole fleet now */
    int64_t census_start;    /* monotonic ms it started, 0 never */
    char census_at[40];      /* when the last one ended (wall clock), "" never */
    unsigned census_heard;   /* leads it heard (ourselves not counted) */
    GHashTable *census_only; /* id -> its roster line: heard only because a census is on,
                                 in no listing, log or note; dropped when it ends */
    char *census_text;       /* the last census: roster lines, "" none */
};

typedef struct {
    char path[200];
    char name[GID_MAX_LEN + 1];
    int kind; /* 0 changed(path), 1 entry added, 2 entry removed */
} pr_note;

/* common.c: the clock, entries, lists, notes, words */
int64_t pri_mono_ms(void);
/* "40s", "3m", "2h" */
void pri_fmt_age(int64_t ms, char *out, size_t n);
void pri_agent_free(gpointer p);
gint pri_cmp_agent(gconstpointer a, gconstpointer b);
gint pri_cmp_str_data(gconstpointer a, gconstpointer b, gpointer ud);
gint pri_cmp_str_ptr(gconstpointer a, gconstpointer b);
void pri_deliver_notes(presence *pr, GArray *notes);
char **pri_groups_clean(const char *const *in, const char *who, bool *ok);
int64_t pri_interval_locked(presence *pr, int64_t now, size_t *n_live);
int64_t pri_group_iv_locked(presence *pr, int64_t now, int64_t iv, size_t *n_members);
size_t pri_group_heard_locked(presence *pr, int64_t now);
int64_t pri_stale_after_locked(presence *pr, const pr_lead *l, int64_t now);
pr_lead *pri_lead_new(presence *pr, const char *id);
void pri_local_to_hb_locked(presence *pr, env_heartbeat *h);
void pri_note(GArray *notes, int kind, const char *path, const char *name);
void pri_plain_copy(char *out, size_t n, const char *in);
void pri_snap_diff_locked(presence *pr, GArray *notes, int64_t now);
char **pri_sorted_copy(char **v);
char **pri_sorted_copy_free(char **v);
pr_state pri_state_of(presence *pr, const pr_lead *l, int64_t now);
bool pri_strv_same(char **a, char **b);
bool pri_in_view_locked(presence *pr, const pr_lead *l, int64_t now);
bool pri_hb_in_view_locked(presence *pr, const env_heartbeat *h);
bool pri_addressed_locked(presence *pr, const pr_lead *l, int64_t now);
bool pri_hb_shares_locked(presence *pr, const env_heartbeat *h);
/* scope.c: we hear only what fleet_view=groups hears now (scoped, auto
 * narrowed or groups, no census on); and the same census or not (a lead
 * heard only because of a census is kept apart: census.c); the leads
 * heard live, ourselves not counted */
bool pri_narrow_locked(presence *pr);
bool pri_narrow_base_locked(presence *pr);
unsigned pri_live_heard_locked(presence *pr, int64_t now);
/* census.c, from pr_tick: fleet_view=auto hearing more than view_limit
 * leads narrows (true: just now; the caller drops what is out of view
 * quietly and says how many in one line) */
bool pri_auto_narrow_locked(presence *pr, int64_t now);
/* census.c: h (believed) is from a lead heard only because a census is on:
 * its line is kept apart (true); false: take it as any heartbeat */
bool pri_census_take_locked(presence *pr, const env_heartbeat *h);

#endif
