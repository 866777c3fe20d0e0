/* SPDX-License-Identifier: Apache-2.0 */
/* sign.c — ed25519 keys on disk, the trust directory, and envelope
 * signatures, on libsodium.
 *
 * Key files are one line of text rather than raw bytes so an operator can
 * see what a file is with cat, paste a public key into a chat, and diff two
 * of them; the type word at the front ("ed25519", "ed25519-secret") keeps a
 * secret key from being dropped into the trust directory by mistake and
 * leaves room for another algorithm later.
 *
 * Every reader here treats its file as hostile input: sizes are capped
 * before reading, the base64 must decode to exactly the expected length
 * with nothing after it (libsodium's decoder also refuses non-zero padding
 * bits, so one key has one spelling), and a secret key's embedded public
 * half must match the one derived from its seed. Creation uses O_EXCL and
 * fchmod, so neither a pre-planted file nor a lax umask decides the mode.
 *
 * The trust directory is forgiving per file and strict per key: one bad
 * .pub must not take the whole fleet's trust down on a reload, so it is
 * skipped with a warning, but a skipped file grants nothing. A file name
 * read from the directory is escaped before it reaches the log, since a
 * name can hold terminal escapes too.
 *
 * Verification looks the key up by the envelope's own "from": the
 * signature proves which trusted key signed, and the lookup ties that key to
 * the claimed sender, so one lead's key cannot vouch for another lead. An
 * agent's id names its host (w1@alpha), and the host's key is the one
 * looked up, so alpha's key cannot vouch for an agent on beta either. */
#include "fleetfs/wire/sign.h"
#include "fleetfs/base/log.h"
#include "fleetfs/os/os.h"
#include "fleetfs/wire/names.h"
#include "fleetfs/wire/trustwatch.h"

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SIG_B64 sodium_base64_VARIANT_ORIGINAL
#define SIG_PUB_TAG "ed25519"
#define SIG_SEC_TAG "ed25519-secret"
/* Far above a real key line (88 or 44 base64 characters plus the tag). */
#define SIG_FILE_MAX 512

_Static_assert(sodium_base64_ENCODED_LEN(crypto_sign_BYTES, SIG_B64) <=
                   sizeof(((envelope *)0)->sig),
               "envelope sig field too small for an ed25519 signature");

struct sig_key {
    unsigned char sk[crypto_sign_SECRETKEYBYTES];
    unsigned char pk[crypto_sign_PUBLICKEYBYTES];
};

struct sig_trust {
    GHashTable *keys; /* coord_id -> crypto_sign_PUBLICKEYBYTES bytes */
};

static int sig_ready(char **err)
{
    if (sodium_init() >= 0)
        return 0;
    if (err != NULL)
        *err = g_strdup("libsodium failed to initialise (no entropy source?)");
    return -1;
}

/* ---- files -------------------------------------------------------------- */

/* Creates path exclusively with exactly mode, writes data, syncs. On
 * failure anything created is removed. */
static int sig_write_new(const char *path, mode_t mode, const char *data, size_t len, char **err)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    size_t off = 0;
    ssize_t n;

    if (fd < 0) {
        if (errno == EEXIST)
            *err = g_strdup_printf("%s already exists; keygen never "
                                   "overwrites a key (move it away or "
                                   "choose another path)",
                                   path);
        else
            *err = g_strdup_printf("cannot create %s: %s", path, g_strerror(errno));
        return -1;
    }
    if (fchmod(fd, mode) < 0)
        goto fail;
    while (off < len) {
        n = write(fd, data + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            goto fail;
        off += (size_t)n;
    }
    if (fsync(fd) < 0)
        goto fail;
    if (close(fd) < 0) {
        fd = -1;
        goto fail;
    }
    return 0;
fail:
    *err = g_strdup_printf("cannot write %s: %s", path, g_strerror(errno));
    if (fd >= 0)
        close(fd);
    unlink(path);
    return -1;
}

/* Reads a small regular file whole into buf (NUL-terminated). st receives
 * its fstat so the caller can judge the mode of what it actually read.
 * 0 ok; -1 and a reason in why. */
static int sig_read_small(const char *path, char *buf, size_t cap, struct stat *st, char *why,
                          size_t whylen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    size_t len = 0;
    ssize_t n;

    if (fd < 0) {
        g_snprintf(why, whylen, "cannot open: %s", g_strerror(errno));
        return -1;
    }
    if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
        g_snprintf(why, whylen, "not a regular file");
        close(fd);
        return -1;
    }
    while (len < cap - 1) {
        n = read(fd, buf + len, cap - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    buf[len] = '\0';
    if (len == cap - 1) {
        g_snprintf(why, whylen, "larger than a key file can be");
        return -1;
    }
    return 0;
}

/* Parses "<tag> <base64>" plus optional trailing whitespace into exactly
 * outlen bytes. NUL bytes in the file end the text early and so fail. */
static int sig_parse_line(const char *text, const char *tag, unsigned char *out, size_t outlen)
{
    size_t taglen = strlen(tag), b64len, binlen = 0;
    const char *b64;

    if (strncmp(text, tag, taglen) != 0 || text[taglen] != ' ')
        return -1;
    b64 = text + taglen + 1;
    b64len = strlen(b64);
    while (b64len > 0 && g_ascii_isspace(b64[b64len - 1]))
        b64len--;
    if (b64len != sodium_base64_ENCODED_LEN(outlen, SIG_B64) - 1)
        return -1;
    if (sodium_base642bin(out, outlen, b64, b64len, NULL, &binlen, NULL, SIG_B64) != 0 ||
        binlen != outlen)
        return -1;
    return 0;
}

/* ---- keys --------------------------------------------------------------- */

int sig_keygen(const char *path, char **err)
{
    unsigned char pk[crypto_sign_PUBLICKEYBYTES];
    unsigned char sk[crypto_sign_SECRETKEYBYTES];
    char sb64[sodium_base64_ENCODED_LEN(sizeof(sk), SIG_B64)];
    char pb64[sodium_base64_ENCODED_LEN(sizeof(pk), SIG_B64)];
    char sline[sizeof(sb64) + sizeof(SIG_SEC_TAG) + 2];
    char *pubpath, *pline;
    int rc = -1, n;

    *err = NULL;
    if (sig_ready(err) < 0)
        return -1;
    pubpath = g_strdup_printf("%s.pub", path);
    crypto_sign_keypair(pk, sk);
    sodium_bin2base64(sb64, sizeof(sb64), sk, sizeof(sk), SIG_B64);
    sodium_bin2base64(pb64, sizeof(pb64), pk, sizeof(pk), SIG_B64);
    n = snprintf(sline, sizeof(sline), "%s %s\n", SIG_SEC_TAG, sb64);
    pline = g_strdup_printf("%s %s\n", SIG_PUB_TAG, pb64);
    if (sig_write_new(path, 0600, sline, (size_t)n, err) == 0) {
        if (sig_write_new(pubpath, 0644, pline, strlen(pline), err) == 0)
            rc = 0;
        else
            unlink(path);
    }
    sodium_memzero(sk, sizeof(sk));
    sodium_memzero(sb64, sizeof(sb64));
    sodium_memzero(sline, sizeof(sline));
    g_free(pline);
    g_free(pubpath);
    return rc;
}

/* The 64-byte secret embeds its public key; a file whose halves disagree
 * was edited or damaged and would sign with a key nobody trusts. */
static bool sig_secret_consistent(const unsigned char *sk)
{
    unsigned char pk[crypto_sign_PUBLICKEYBYTES];
    unsigned char sk2[crypto_sign_SECRETKEYBYTES];
    bool ok;

    crypto_sign_seed_keypair(pk, sk2, sk);
    ok = sodium_memcmp(sk, sk2, sizeof(sk2)) == 0;
    sodium_memzero(sk2, sizeof(sk2));
    return ok;
}

sig_key *sig_load_secret(const char *path, char **err)
{
    char buf[SIG_FILE_MAX], why[128];
    struct stat st;
    sig_key *k;

    *err = NULL;
    if (sig_ready(err) < 0)
        return NULL;
    if (sig_read_small(path, buf, sizeof(buf), &st, why, sizeof(why)) < 0) {
        sodium_memzero(buf, sizeof(buf));
        *err = g_strdup_printf("secret key %s: %s", path, why);
        return NULL;
    }
    {
        /* a public key given as key= (the .pub): no chmod will mend that */
        unsigned char pk[crypto_sign_PUBLICKEYBYTES];
        if (sig_parse_line(buf, SIG_PUB_TAG, pk, sizeof(pk)) == 0) {
            sodium_memzero(buf, sizeof(buf));
            *err = g_strdup_printf(
                "key=%s is a public key: key= takes the secret key, the "
                "file without .pub that fleetfs keygen wrote next to it%s",
                path, g_str_has_suffix(path, ".pub") ? " (drop the .pub from the path)" : "");
            return NULL;
        }
    }
    if ((st.st_mode & 077) != 0) {
        sodium_memzero(buf, sizeof(buf));
        *err = g_strdup_printf("secret key %s is accessible by group or "
                               "others (mode %04o); run: chmod 600 %s "
                               "(and consider making a new key)",
                               path, (unsigned)(st.st_mode & 07777), path);
        return NULL;
    }
    k = calloc(1, sizeof(*k));
    if (k == NULL) {
        sodium_memzero(buf, sizeof(buf));
        *err = g_strdup("out of memory");
        return NULL;
    }
    if (sig_parse_line(buf, SIG_SEC_TAG, k->sk, sizeof(k->sk)) < 0 ||
        !sig_secret_consistent(k->sk)) {
        sodium_memzero(buf, sizeof(buf));
        sig_key_free(k);
        *err = g_strdup_printf("secret key %s is not a fleetfs ed25519 "
                               "secret key (expected one line \"%s "
                               "<base64>\"; make one with fleetfs keygen)",
                               path, SIG_SEC_TAG);
        return NULL;
    }
    sodium_memzero(buf, sizeof(buf));
    crypto_sign_ed25519_sk_to_pk(k->pk, k->sk);
    return k;
}

void sig_key_free(sig_key *k)
{
    if (k == NULL)
        return;
    sodium_memzero(k, sizeof(*k));
    free(k);
}

/* ---- trust -------------------------------------------------------------- */

/* Like ssh's StrictModes: whoever may change a trust file or directory
 * can make this host trust any key, so it must belong to us (or root) and
 * be writable by nobody else.  True (and why) when it is not so. */
bool sig_lax_owner_or_mode(const struct stat *st, char *why, size_t whylen)
{
    if (st->st_uid != geteuid() && st->st_uid != 0) {
        g_snprintf(why, whylen,
                   "belongs to uid %u, not to this user (uid %u) or root; run: chown %u",
                   (unsigned)st->st_uid, (unsigned)geteuid(), (unsigned)geteuid());
        return true;
    }
    if ((st->st_mode & (S_IWGRP | S_IWOTH)) != 0) {
        g_snprintf(why, whylen, "writable by %s (mode %04o); run: chmod go-w",
                   (st->st_mode & S_IWOTH) ? "anyone" : "its group",
                   (unsigned)(st->st_mode & 07777));
        return true;
    }
    return false;
}

static int sig_read_pub(const char *path, unsigned char *pk, char *why, size_t whylen)
{
    char buf[SIG_FILE_MAX];
    struct stat st;

    if (sig_read_small(path, buf, sizeof(buf), &st, why, whylen) < 0)
        return -1;
    if (sig_lax_owner_or_mode(&st, why, whylen))
        return -1;
    if (strncmp(buf, SIG_SEC_TAG " ", sizeof(SIG_SEC_TAG)) == 0) {
        sodium_memzero(buf, sizeof(buf));
        g_snprintf(why, whylen,
                   "this is a SECRET key: remove it from "
                   "the trust directory and copy the .pub instead");
        return -1;
    }
    if (sig_parse_line(buf, SIG_PUB_TAG, pk, crypto_sign_PUBLICKEYBYTES) < 0) {
        g_snprintf(why, whylen,
                   "not one line \"%s <base64 of 32 "
                   "bytes>\"",
                   SIG_PUB_TAG);
        return -1;
    }
    return 0;
}

/* Considers one directory entry; adds its key when it is a good one. */
static void sig_trust_entry(sig_trust *t, const char *dir, const char *name, bool warn)
{
    unsigned char pk[crypto_sign_PUBLICKEYBYTES];
    char why[128];
    char *stem, *path, *shown;

    if (!g_str_has_suffix(name, ".pub"))
        return;
    stem = g_strndup(name, strlen(name) - 4);
    path = g_build_filename(dir, name, NULL);
    shown = g_strescape(path, NULL);
    if (!name_valid(stem)) {
        if (warn)
            log_warn("trusted_keys: ignoring %s: the name before .pub must "
                     "be a lead name ([a-z0-9][a-z0-9_-]{0,62})",
                     shown);
    } else if (sig_read_pub(path, pk, why, sizeof(why)) < 0) {
        if (warn)
            log_warn("trusted_keys: skipping %s: %s", shown, why);
    } else
        g_hash_table_replace(t->keys, g_steal_pointer(&stem), g_memdup2(pk, sizeof(pk)));
    g_free(shown);
    g_free(path);
    g_free(stem);
}

static sig_trust *sig_trust_read(const char *dir, bool warn, char **err)
{
    GError *ge = NULL;
    GDir *d;
    const char *name;
    char why[160];
    struct stat st;
    sig_trust *t;
    char *shown;

    *err = NULL;
    if (sig_ready(err) < 0)
        return NULL;
    d = g_dir_open(dir, 0, &ge);
    if (d == NULL) {
        *err = g_strdup_printf("trusted_keys directory %s: %s", dir, ge->message);
        g_error_free(ge);
        return NULL;
    }
    if (stat(dir, &st) == 0 && sig_lax_owner_or_mode(&st, why, sizeof why)) {
        shown = g_strescape(dir, NULL);
        *err = g_strdup_printf("trusted_keys directory %s: %s (whoever can change it can add "
                               "a key this host trusts)",
                               shown, why);
        g_free(shown);
        g_dir_close(d);
        return NULL;
    }
    t = g_new0(sig_trust, 1);
    t->keys = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    while ((name = g_dir_read_name(d)) != NULL)
        sig_trust_entry(t, dir, name, warn);
    g_dir_close(d);
    return t;
}

/* FNV-1a, 64 bits, over n more bytes */
static uint64_t stamp_mix(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211u;
    }
    return h;
}

static uint64_t stamp_stat(uint64_t h, const struct stat *st)
{
    int64_t v[] = {(int64_t)st->st_ino,
                   (int64_t)st->st_size,
                   (int64_t)st->st_mode,
                   (int64_t)st->st_uid,
                   (int64_t)os_st_mtime(st).tv_sec,
                   (int64_t)os_st_mtime(st).tv_nsec,
                   (int64_t)os_st_ctime(st).tv_sec,
                   (int64_t)os_st_ctime(st).tv_nsec};
    return stamp_mix(h, v, sizeof v);
}

/* The full stamp: a stat of every .pub (trustwatch.c answers without it
 * where it can). */
static int64_t sig_trust_stamp_full(const char *dir)
{
    uint64_t h = 14695981039346656037u;
    struct stat st;
    const char *name;
    GDir *d;

    if (!dir || stat(dir, &st) < 0 || !(d = g_dir_open(dir, 0, NULL)))
        return -1;
    h = stamp_stat(h, &st);
    /* readdir's order is the directory's own and stays put while nothing
     * is added or removed (which changes the directory's times anyway) */
    while ((name = g_dir_read_name(d)) != NULL) {
        char *path;
        if (!g_str_has_suffix(name, ".pub"))
            continue;
        path = g_build_filename(dir, name, NULL);
        h = stamp_mix(h, name, strlen(name) + 1);
        if (stat(path, &st) == 0)
            h = stamp_stat(h, &st);
        g_free(path);
    }
    g_dir_close(d);
    return (int64_t)(h >> 1); /* never -1 */
}

int64_t sig_trust_stamp(const char *dir)
{
    return tw_stamp(dir, sig_trust_stamp_full);
}

int sig_trust_refresh(sig_trust **t, const char *dir, bool warn, int64_t *stamp,
                      int64_t *checked_ms, bool force, char **err)
{
    int64_t now = g_get_monotonic_time() / 1000, st;
    sig_trust *nt;

    *err = NULL;
    if (!force && *checked_ms && now - *checked_ms < SIG_TRUST_CHECK_MS)
        return 0;
    *checked_ms = now;
    st = sig_trust_stamp(dir);
    if (st == *stamp)
        return 0;
    *stamp = st;
    nt = sig_trust_read(dir, warn, err);
    if (!nt)
        return -1;
    sig_trust_free(*t);
    *t = nt;
    return 1;
}

sig_trust *sig_trust_load(const char *dir, char **err)
{
    return sig_trust_read(dir, true, err);
}

sig_trust *sig_trust_load_quiet(const char *dir, char **err)
{
    return sig_trust_read(dir, false, err);
}

static const unsigned char *sig_trust_key(const sig_trust *t, const char *id)
{
    if (t == NULL || id == NULL)
        return NULL;
    return g_hash_table_lookup(t->keys, id);
}

bool sig_trust_has(const sig_trust *t, const char *coord_id)
{
    return sig_trust_key(t, coord_id) != NULL;
}

size_t sig_trust_count(const sig_trust *t)
{
    return t == NULL ? 0 : g_hash_table_size(t->keys);
}

void sig_trust_free(sig_trust *t)
{
    if (t == NULL)
        return;
    g_hash_table_destroy(t->keys);
    g_free(t);
}

bool sig_key_matches(const sig_trust *t, const char *coord_id, const sig_key *k)
{
    const unsigned char *pk = sig_trust_key(t, coord_id);

    return pk != NULL && k != NULL && sodium_memcmp(pk, k->pk, crypto_sign_PUBLICKEYBYTES) == 0;
}

/* ---- signatures --------------------------------------------------------- */

int sig_sign(const sig_key *k, envelope *e)
{
    unsigned char sig[crypto_sign_BYTES];
    unsigned char *buf;
    size_t len;

    if (sig_ready(NULL) < 0 || env_signing_fields(e, &buf, &len) < 0)
        return -1;
    crypto_sign_detached(sig, NULL, buf, len, k->sk);
    free(buf);
    sodium_bin2base64(e->sig, sizeof(e->sig), sig, sizeof(sig), SIG_B64);
    return 0;
}

sig_result sig_verify(const sig_trust *t, const envelope *e)
{
    char host[NAME_MAX_LEN + 1];
    unsigned char sig[crypto_sign_BYTES];
    const unsigned char *pk;
    unsigned char *buf;
    size_t len, siglen = 0, b64len;
    int rc;

    b64len = strnlen(e->sig, sizeof(e->sig));
    if (b64len == 0)
        return SIG_UNSIGNED;
    /* an agent's key is its host's (SPEC section 10): w1@alpha is signed
     * by alpha; something that is not an id has no key */
    if (!id_host(e->from, host))
        return SIG_UNKNOWN_KEY;
    pk = sig_trust_key(t, host);
    if (pk == NULL)
        return SIG_UNKNOWN_KEY;
    if (b64len != sodium_base64_ENCODED_LEN(sizeof(sig), SIG_B64) - 1 || sig_ready(NULL) < 0 ||
        sodium_base642bin(sig, sizeof(sig), e->sig, b64len, NULL, &siglen, NULL, SIG_B64) != 0 ||
        siglen != sizeof(sig))
        return SIG_BAD;
    /* Out of memory counts as bad: refusing a good message is loud and
	 * recoverable, believing an unchecked one is neither. */
    if (env_signing_fields(e, &buf, &len) < 0)
        return SIG_BAD;
    rc = crypto_sign_verify_detached(sig, buf, len, pk);
    free(buf);
    return rc == 0 ? SIG_OK : SIG_BAD;
}

/* Heartbeats: the same scheme over their own field list. */
int sig_sign_bytes(const sig_key *k, const unsigned char *buf, size_t len, char *out, size_t outsz)
{
    unsigned char sig[crypto_sign_BYTES];

    if (sig_ready(NULL) < 0)
        return -1;
    crypto_sign_detached(sig, NULL, buf, len, k->sk);
    sodium_bin2base64(out, outsz, sig, sizeof(sig), SIG_B64);
    return 0;
}

sig_result sig_verify_bytes(const sig_trust *t, const char *from, const char *b64, size_t b64max,
                            const unsigned char *buf, size_t len)
{
    unsigned char sig[crypto_sign_BYTES];
    const unsigned char *pk;
    size_t siglen = 0, b64len = strnlen(b64, b64max);

    if (b64len == 0)
        return SIG_UNSIGNED;
    pk = sig_trust_key(t, from);
    if (pk == NULL)
        return SIG_UNKNOWN_KEY;
    if (b64len != sodium_base64_ENCODED_LEN(sizeof(sig), SIG_B64) - 1 || sig_ready(NULL) < 0 ||
        sodium_base642bin(sig, sizeof(sig), b64, b64len, NULL, &siglen, NULL, SIG_B64) != 0 ||
        siglen != sizeof(sig))
        return SIG_BAD;
    return crypto_sign_verify_detached(sig, buf, len, pk) == 0 ? SIG_OK : SIG_BAD;
}

int sig_sign_hb(const sig_key *k, env_heartbeat *h)
{
    unsigned char *buf;
    size_t len;
    int rc;

    if (env_hb_signing_fields(h, &buf, &len) < 0)
        return -1;
    rc = sig_sign_bytes(k, buf, len, h->sig, sizeof(h->sig));
    free(buf);
    if (rc == 0 && h->ext) {
        if (env_hb_agents_signing_fields(h, &buf, &len) < 0)
            return -1;
        rc = sig_sign_bytes(k, buf, len, h->asig, sizeof(h->asig));
        free(buf);
    }
    if (rc == 0 && h->has_profiles) {
        if (env_hb_profiles_signing_fields(h, &buf, &len) < 0)
            return -1;
        rc = sig_sign_bytes(k, buf, len, h->psig, sizeof(h->psig));
        free(buf);
    }
    if (rc == 0 && h->has_group_iv) {
        if (env_hb_group_signing_fields(h, &buf, &len) < 0)
            return -1;
        rc = sig_sign_bytes(k, buf, len, h->gsig, sizeof(h->gsig));
        free(buf);
    }
    return rc;
}

/* Checks b64 (sig or asig of h) over the bytes fields() gives for h. */
static sig_result
sig_verify_hb_over(const sig_trust *t, const env_heartbeat *h, const char *b64, size_t b64max,
                   int (*fields)(const env_heartbeat *, unsigned char **, size_t *))
{
    unsigned char *buf;
    size_t len;
    sig_result r;

    if (strnlen(b64, b64max) == 0)
        return SIG_UNSIGNED;
    if (fields(h, &buf, &len) < 0)
        return SIG_BAD;
    r = sig_verify_bytes(t, h->from, b64, b64max, buf, len);
    free(buf);
    return r;
}

sig_result sig_verify_hb(const sig_trust *t, const env_heartbeat *h)
{
    return sig_verify_hb_over(t, h, h->sig, sizeof(h->sig), env_hb_signing_fields);
}

sig_result sig_verify_hb_agents(const sig_trust *t, const env_heartbeat *h)
{
    return sig_verify_hb_over(t, h, h->asig, sizeof(h->asig), env_hb_agents_signing_fields);
}

sig_result sig_verify_hb_profiles(const sig_trust *t, const env_heartbeat *h)
{
    return sig_verify_hb_over(t, h, h->psig, sizeof(h->psig), env_hb_profiles_signing_fields);
}

sig_result sig_verify_hb_group(const sig_trust *t, const env_heartbeat *h)
{
    return sig_verify_hb_over(t, h, h->gsig, sizeof(h->gsig), env_hb_group_signing_fields);
}

const char *sig_result_name(sig_result r)
{
    switch (r) {
    case SIG_OK:
        return "ok";
    case SIG_UNSIGNED:
        return "unsigned";
    case SIG_UNKNOWN_KEY:
        return "unknown-key";
    case SIG_BAD:
        return "bad-signature";
    }
    return "bad-signature";
}
