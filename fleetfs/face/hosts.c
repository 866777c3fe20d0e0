/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/face/hosts.c — hosts/ and the requests a lead writes there (design in
 * hosts.h).
 *
 * Why the request is recorded before it is published: the far host may
 * answer within a millisecond of taking it, and its answer is believed
 * only for a request the book holds (ak_answer), so a record written after
 * the broker's confirm could lose a fast answer.  A publish that certainly
 * did not reach control.<h> (no queue, no link, refused, full) then
 * records the request `failed` with "not sent: why", the same way the far
 * host's own answer would, so the book never shows a request waiting for
 * an answer that cannot come; one whose confirm did not come in time stays
 * `requested` (it may have arrived) and fails by its expiry like any
 * unanswered one.
 *
 * Everything a lead writes is checked here before anything is signed
 * (wire/control.c's ctl_request_parse: one object, known keys only; then
 * the names by the agent-name rule): a bad request costs an EINVAL and
 * publishes nothing.  The far host checks it all again (spawn/check.c):
 * this side only saves a round trip and tells the writer at once. */
#include "fleetfs/face/hosts.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "broker/conn.h"
#include "fleetfs/base/log.h"
#include "fleetfs/spawn/asked.h"
#include "fleetfs/wire/control.h"
#include "fleetfs/wire/names.h"

static void hs_changed(fleet *f, const char *h, const char *file)
{
    char path[160];
    snprintf(path, sizeof path, "hosts/%s/%s", h, file);
    nt_changed(g_atomic_pointer_get(&f->nt), path);
}

/* The hook of mb_set_control_answers: on the broker thread, the answer
 * already checked (signature, to us, expiry, once). */
static int hs_answer(void *ud, const ctl_env *ans, char *why, size_t n)
{
    fleet *f = ud;
    int rc;

    g_mutex_lock(&f->hs_lock);
    rc = f->asked ? ak_answer(f->asked, ans, env_now_ms(), why, n) : -1;
    g_mutex_unlock(&f->hs_lock);
    if (rc < 0)
        return -1;
    log_info("spawn: %s answered request %s: %s%s%s%s%s", ans->from, ans->requestId, ans->state,
             ans->gid[0] ? " " : "", ans->gid, ans->detail[0] ? ": " : "", ans->detail);
    hs_changed(f, ans->from, "spawns");
    return 0;
}

int hs_start(fleet *f, char **err)
{
    char *path = g_build_filename(f->opts->state_dir, "spawns.jsonl", NULL);

    g_mutex_init(&f->hs_lock);
    f->asked = ak_open(path, err);
    g_free(path);
    if (!f->asked)
        return -1;
    ak_set_grace(f->asked, f->opts->spawn_grace_ms);
    mb_set_control_answers(f->mb, hs_answer, f);
    return 0;
}

void hs_free(fleet *f)
{
    if (!f->asked)
        return;
    mb_set_control_answers(f->mb, NULL, NULL);
    ak_close(f->asked);
    f->asked = NULL;
    g_mutex_clear(&f->hs_lock);
}

bool hs_known(const fleet *f, const char *h)
{
    if (!name_valid(h))
        return false;
    return !strcmp(h, f->opts->coord_id) || (f->pr && pr_is_host(f->pr, h));
}

char **hs_list(const fleet *f)
{
    if (f->pr)
        return pr_hosts(f->pr);
    return g_strdupv((char *[]){f->opts->coord_id, NULL});
}

static void hs_join(GString *s, const char *key, char **v, const char *none)
{
    g_string_append_printf(s, "%s:", key);
    if (!v || !*v)
        g_string_append_printf(s, " %s", none);
    for (char **p = v; p && *p; p++)
        g_string_append_printf(s, " %s", *p);
    g_string_append_c(s, '\n');
}

GString *hs_status(fleet *f, const char *h)
{
    GString *s = g_string_new(NULL);
    pr_info in;
    char words[96];
    char **profiles = f->pr ? pr_host_profiles(f->pr, h) : NULL;
    GPtrArray *agents = f->pr ? pr_agents(f->pr) : g_ptr_array_new();
    GPtrArray *here = g_ptr_array_new();
    bool heard = f->pr && pr_get(f->pr, h, &in);

    g_string_append_printf(s, "host: %s\nself: %s\n", h,
                           strcmp(h, f->opts->coord_id) ? "no" : "yes");
    if (heard) {
        pr_words(&in, words, sizeof words);
        g_string_append_printf(s, "presence: %s\nlast_heartbeat: %s\n", words,
                               in.last_at[0] ? in.last_at : "never");
        if (in.last_at[0])
            g_string_append_printf(s, "machine: %s\nversion: %s\n", in.host, in.version);
    } else {
        g_string_append(s, "presence: unknown\nlast_heartbeat: never\n");
    }
    hs_join(s, "profiles", profiles,
            profiles || !strcmp(h, f->opts->coord_id)
                ? "none"
                : "unknown (not heard yet, or its fleetfs does not announce profiles)");
    for (guint i = 0; i < agents->len; i++) {
        pr_agent_info *a = agents->pdata[i];
        if (!strcmp(a->host, h))
            g_ptr_array_add(here, a->gid);
    }
    g_ptr_array_add(here, NULL);
    hs_join(s, "agents", (char **)here->pdata, "none");
    g_ptr_array_free(here, TRUE);
    g_ptr_array_unref(agents);
    g_strfreev(profiles);
    return s;
}

GString *hs_spawns(fleet *f, const char *h)
{
    size_t len = 0;
    char *text;
    GString *s;

    g_mutex_lock(&f->hs_lock);
    text = f->asked ? ak_render(f->asked, h, &len) : g_strdup("");
    g_mutex_unlock(&f->hs_lock);
    s = g_string_new_len(text, (gssize)len);
    g_free(text);
    return s;
}

/* Signs e (addressed to h), records it `requested`, publishes it; a
 * publish that certainly failed records it `failed`.  0 or an errno. */
static int hs_send(fleet *f, const char *h, ctl_env *e, const char *what)
{
    char detail[512] = "", *body;
    size_t len = 0;
    fe_code r;
    int rc;

    if (mb_sign_control(f->mb, e) < 0) {
        log_warn("spawn: hosts/%s/%s: not sent: control requests are always signed and this "
                 "mount has no key (-o insecure); mount with key= and trusted_keys=",
                 h, what);
        return EPERM;
    }
    body = ctl_encode(e, &len);
    if (!body)
        return EINVAL;
    g_mutex_lock(&f->hs_lock);
    rc = ak_requested(f->asked, e, env_now_ms());
    g_mutex_unlock(&f->hs_lock);
    if (rc < 0) {
        rc = errno ? errno : EIO;
        log_warn("spawn: hosts/%s/%s: not sent: cannot record it in %s/spawns.jsonl: %s", h, what,
                 f->opts->state_dir, g_strerror(rc));
        g_free(body);
        return rc;
    }
    r = br_publish_route(f->br, BR_EXCHANGE_CONTROL, h, NULL, e->msgId, body, len, 0,
                         f->opts->send_timeout_ms, NULL, detail, sizeof detail);
    g_free(body);
    if (r != FE_OK && r != FE_TIMEOUT) {
        ctl_env a;
        char why[300];

        ctl_init(&a, CTL_TYPE_SPAWNED, h, f->opts->coord_id, env_now_ms(), CTL_TTL_MS);
        g_strlcpy(a.requestId, e->msgId, sizeof a.requestId);
        g_strlcpy(a.state, "failed", sizeof a.state);
        if (r == FE_NO_MAILBOX)
            snprintf(a.detail, sizeof a.detail,
                     "not sent: no control queue takes requests for %s: its mount makes and binds "
                     "control.%s when its broker login may configure; else an operator runs "
                     "`fleetfs declare %s` (fleetfs-broker host add)",
                     h, h, h);
        else
            snprintf(a.detail, sizeof a.detail, "not sent: %s", fe_hint(r));
        g_mutex_lock(&f->hs_lock);
        ak_answer(f->asked, &a, env_now_ms(), why, sizeof why);
        g_mutex_unlock(&f->hs_lock);
        log_warn("spawn: hosts/%s/%s: request %s not sent: %s%s%s", h, what, e->msgId,
                 a.detail + strlen("not sent: "), detail[0] ? "; broker: " : "", detail);
    } else if (r == FE_TIMEOUT) {
        log_warn("spawn: hosts/%s/%s: request %s: no confirm from the broker in time; it may "
                 "still arrive (hosts/%s/spawns says when it is answered, or failed)",
                 h, what, e->msgId, h);
    } else {
        log_info("spawn: asked %s to %s (request %s)", h, what, e->msgId);
    }
    hs_changed(f, h, "spawns");
    return r == FE_OK ? 0 : fe_errno(r);
}

int hs_spawn(fleet *f, const char *h, const char *buf, size_t len)
{
    ctl_env e;
    char why[300];
    int rc;

    if (ctl_request_parse(buf, len, f->opts->max_message, &e, why, sizeof why) < 0) {
        log_warn("spawn: hosts/%s/spawn: refused, nothing sent: %s", h, why);
        return EINVAL;
    }
    if (!agent_name_valid(e.profile) || !agent_name_valid(e.name)) {
        log_warn("spawn: hosts/%s/spawn: refused, nothing sent: %s is not a name "
                 "([a-z][a-z0-9_-], at most 32)",
                 h, agent_name_valid(e.profile) ? "name" : "profile");
        ctl_free(&e);
        return EINVAL;
    }
    ctl_address(&e, CTL_TYPE_SPAWN, f->opts->coord_id, h, env_now_ms(), f->opts->spawn_ttl_ms);
    rc = hs_send(f, h, &e, "spawn");
    ctl_free(&e);
    return rc;
}

int hs_stop(fleet *f, const char *h, const char *buf, size_t len)
{
    ctl_env e;
    char gid[CTL_GID_MAX + 1], host[NAME_MAX_LEN + 1];
    const char *at;

    if (len > 0 && buf[len - 1] == '\n')
        len--;
    if (len == 0 || len > CTL_GID_MAX || memchr(buf, '\0', len)) {
        log_warn("spawn: hosts/%s/stop: refused, nothing sent: write one agent id "
                 "(name@%s)",
                 h, h);
        return EINVAL;
    }
    memcpy(gid, buf, len);
    gid[len] = '\0';
    if (!gid_valid(gid) || !id_host(gid, host) || strcmp(host, h) != 0) {
        log_warn("spawn: hosts/%s/stop: refused, nothing sent: not an agent id of %s "
                 "(name@%s)",
                 h, h, h);
        return EINVAL;
    }
    ctl_init(&e, CTL_TYPE_STOP, f->opts->coord_id, h, env_now_ms(), f->opts->spawn_ttl_ms);
    g_strlcpy(e.gid, gid, sizeof e.gid);
    at = strchr(gid, '@');
    snprintf(e.name, sizeof e.name, "%.*s", (int)(at - gid), gid);
    return hs_send(f, h, &e, "stop");
}

void hs_tick(fleet *f)
{
    size_t n;
    char **hosts;

    if (!f->asked)
        return;
    g_mutex_lock(&f->hs_lock);
    n = ak_expire(f->asked, env_now_ms());
    g_mutex_unlock(&f->hs_lock);
    if (n == 0)
        return;
    log_warn("spawn: %zu request(s) had no answer within spawn_ttl and spawn_grace: failed "
             "(hosts/<host>/spawns; is that host's fleetfs running?)",
             n);
    hosts = hs_list(f);
    for (char **p = hosts; p && *p; p++)
        hs_changed(f, *p, "spawns");
    g_strfreev(hosts);
}
