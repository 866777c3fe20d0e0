/* fleetfs/model/accept.c — acceptance: what may enter the inbox.
 *
 * The checks of SPEC section 4, in its order: the signature against the
 * key trusted for `from` (the trust directory is re-read when an unknown
 * sender shows up and the directory changed: a peer's .pub was just copied
 * in), the type, the recipient, a lifetime no longer than message_ttl, not
 * expired; then, once redeliveries are told apart (held.c), not a replay
 * (the persisted seen set).  A seen set that cannot be written is not
 * silent: status shows it, and the log says so once per failure streak.
 */
#include "fleetfs/model/mb_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "fleetfs/log.h"

/* The trust directory's change time, to notice a .pub copied in. */
static int64_t trust_stamp(const char *dir)
{
    struct stat st;
    if (stat(dir, &st) < 0)
        return -1;
    return (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
}

int mb_set_security(mailbox *mb, char **err)
{
    char *path = g_build_filename(mb->o->state_dir, "seen", NULL);
    mb->seen = seen_open(path, SEEN_CAP, err);
    g_free(path);
    if (!mb->seen)
        return -1;
    if (outbox_open(mb, err) < 0)
        return -1;
    if (mb->o->insecure)
        return 0;
    if (!mb->o->key || !mb->o->trusted_keys) {
        *err = g_strdup_printf(
            "messages are signed and checked, so fleetfs needs -o key=FILE (make one with "
            "'fleetfs keygen FILE') and -o trusted_keys=DIR (the peers' <coord_id>.pub files); "
            "-o insecure turns this off for local experiments only");
        return -1;
    }
    mb->key = sig_load_secret(mb->o->key, err);
    if (!mb->key)
        return -1;
    mb->trust = sig_trust_load(mb->o->trusted_keys, err);
    if (!mb->trust)
        return -1;
    mb->trust_loaded = trust_stamp(mb->o->trusted_keys);
    if (sig_trust_has(mb->trust, mb->o->coord_id) &&
        !sig_key_matches(mb->trust, mb->o->coord_id, mb->key))
        log_warn("security: %s/%s.pub is not the public half of %s; peers that trust that "
                 "file will reject this host's messages",
                 mb->o->trusted_keys, mb->o->coord_id, mb->o->key);
    return 0;
}

char *mb_security_words(mailbox *mb)
{
    char *w;
    if (mb->o->insecure)
        return g_strdup("INSECURE (-o insecure): messages are neither signed nor checked; "
                        "anyone with broker access can type into this lead's pane");
    g_mutex_lock(&mb->lock);
    w = g_strdup_printf("on (ed25519; %zu trusted keys in %s)", sig_trust_count(mb->trust),
                        mb->o->trusted_keys);
    g_mutex_unlock(&mb->lock);
    return w;
}

void accept_close(mailbox *mb)
{
    sig_key_free(mb->key);
    sig_trust_free(mb->trust);
    seen_close(mb->seen);
}

sig_result accept_verify_locked(mailbox *mb, const envelope *e)
{
    sig_result r = sig_verify(mb->trust, e);
    int64_t stamp;
    if (r == SIG_UNKNOWN_KEY && (stamp = trust_stamp(mb->o->trusted_keys)) != mb->trust_loaded) {
        char *err = NULL;
        sig_trust *t = sig_trust_load(mb->o->trusted_keys, &err);
        mb->trust_loaded = stamp;
        if (t) {
            sig_trust_free(mb->trust);
            mb->trust = t;
            r = sig_verify(mb->trust, e);
        } else {
            log_warn("security: cannot re-read %s: %s", mb->o->trusted_keys, err);
            g_free(err);
        }
    }
    return r;
}

const char *accept_check_locked(mailbox *mb, const envelope *e, bool *verified, char *why, size_t n)
{
    int64_t exp, sent;
    *verified = mb->o->insecure;
    if (!mb->o->insecure) {
        sig_result r = accept_verify_locked(mb, e);
        if (r != SIG_OK) {
            snprintf(why, n, "%s",
                     r == SIG_UNSIGNED      ? "no signature"
                     : r == SIG_UNKNOWN_KEY ? "no trusted key for the sender in trusted_keys"
                                            : "the signature does not match the sender's key");
            return sig_result_name(r);
        }
        *verified = true;
    }
    if (strcmp(e->type, ENV_TYPE_COORD) != 0) {
        snprintf(why, n, "a %s envelope arrived in a mailbox", e->type);
        return "wrong-type";
    }
    if (strcmp(e->to, mb->o->coord_id) != 0) {
        snprintf(why, n, "addressed to '%s', not to this lead", e->to);
        return "wrong-recipient";
    }
    if (env_time_parse(e->expiresAt, &exp) < 0 || env_time_parse(e->sentAt, &sent) < 0 ||
        exp - sent > mb->o->message_ttl_ms + CLOCK_SKEW_MS) {
        snprintf(why, n, "lifetime from %s to %s is longer than message_ttl", e->sentAt,
                 e->expiresAt);
        return "bad-lifetime";
    }
    if (exp + CLOCK_SKEW_MS < env_now_ms()) {
        snprintf(why, n, "expired at %s", e->expiresAt);
        return "expired";
    }
    return NULL;
}

bool accept_first_time_locked(mailbox *mb, const char *msg_id)
{
    int r = seen_add(mb->seen, msg_id);
    if (r < 0) {
        /* remembered in memory, not on disk: a restart would forget it */
        if (!mb->seen_err[0])
            log_warn("security: cannot record %s in the seen set (%s); a replay of it after a "
                     "restart would not be caught: free space or fix permissions in %s",
                     msg_id, g_strerror(errno), mb->o->state_dir);
        snprintf(mb->seen_err, sizeof mb->seen_err, "%s", g_strerror(errno));
        return true;
    }
    if (mb->seen_err[0]) {
        log_info("security: the seen set is written again");
        mb->seen_err[0] = '\0';
    }
    return r == 0;
}
