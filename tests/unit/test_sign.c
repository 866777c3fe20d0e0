/* SPDX-License-Identifier: Apache-2.0 */
/* test_sign.c — keys on disk, the trust directory, and envelope signatures.
 *
 * The signature is what stands between a broker login and a typed
 * keystroke, so these tests try to get a wrong message believed: every
 * signed field altered, bytes shifted across a field boundary, a key of one
 * lead signing for another, hostile sig strings, and key files with the
 * wrong mode, the wrong content or the wrong name. Each test works in its
 * own temporary directory. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fleetfs/wire/envelope.h"
#include "fleetfs/wire/sign.h"
#include "fleetfs/wire/trustwatch.h"

#define ID1 "0123456789abcdef0123456789abcdef"
#define ID2 "fedcba9876543210fedcba9876543210"
#define T1 "2026-11-29T09:27:41.123Z"
#define T2 "2026-12-06T09:27:41.123Z"

/* A scratch directory with keys for alpha and beta and a trust dir holding
 * both public keys. */
struct fx {
    char *dir;
    char *alpha; /* alpha's secret key path */
    char *beta;
    char *trust; /* trusted_keys directory */
    sig_key *ka, *kb;
    sig_trust *t;
};

static char *fx_path(struct fx *f, const char *name)
{
    return g_build_filename(f->dir, name, NULL);
}

static void put_file(const char *path, const char *text, mode_t mode)
{
    assert_true(g_file_set_contents(path, text, -1, NULL));
    assert_int_equal(chmod(path, mode), 0);
}

static void copy_pub(const char *secret, const char *trust, const char *name)
{
    char *src = g_strdup_printf("%s.pub", secret), *text = NULL;
    char *dst = g_build_filename(trust, name, NULL);

    assert_true(g_file_get_contents(src, &text, NULL, NULL));
    put_file(dst, text, 0644);
    g_free(text);
    g_free(src);
    g_free(dst);
}

static void rm_tree(const char *dir)
{
    GDir *d = g_dir_open(dir, 0, NULL);
    const char *n;
    char *p;

    if (d == NULL) {
        g_remove(dir);
        return;
    }
    while ((n = g_dir_read_name(d)) != NULL) {
        p = g_build_filename(dir, n, NULL);
        if (g_file_test(p, G_FILE_TEST_IS_DIR) && !g_file_test(p, G_FILE_TEST_IS_SYMLINK))
            rm_tree(p);
        else
            g_remove(p);
        g_free(p);
    }
    g_dir_close(d);
    g_rmdir(dir);
}

static int setup(void **state)
{
    struct fx *f = g_new0(struct fx, 1);
    char *err = NULL;

    f->dir = g_dir_make_tmp("fleetfs-sign-XXXXXX", NULL);
    assert_non_null(f->dir);
    f->alpha = fx_path(f, "alpha.key");
    f->beta = fx_path(f, "beta.key");
    f->trust = fx_path(f, "trusted");
    assert_int_equal(g_mkdir(f->trust, 0755), 0);
    assert_int_equal(sig_keygen(f->alpha, &err), 0);
    assert_int_equal(sig_keygen(f->beta, &err), 0);
    copy_pub(f->alpha, f->trust, "alpha.pub");
    copy_pub(f->beta, f->trust, "beta.pub");
    f->ka = sig_load_secret(f->alpha, &err);
    assert_non_null(f->ka);
    f->kb = sig_load_secret(f->beta, &err);
    assert_non_null(f->kb);
    f->t = sig_trust_load(f->trust, &err);
    assert_non_null(f->t);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;

    sig_key_free(f->ka);
    sig_key_free(f->kb);
    sig_trust_free(f->t);
    rm_tree(f->dir);
    g_free(f->dir);
    g_free(f->alpha);
    g_free(f->beta);
    g_free(f->trust);
    g_free(f);
    return 0;
}

static void make_coord(envelope *e, const char *from, const char *to)
{
    memset(e, 0, sizeof(*e));
    e->v = 1;
    strcpy(e->type, "coord");
    strcpy(e->msgId, ID1);
    strcpy(e->from, from);
    strcpy(e->to, to);
    strcpy(e->sentAt, T1);
    strcpy(e->expiresAt, T2);
    e->body = strdup("I take the parser, you take codegen");
    e->body_len = strlen(e->body);
}

static void make_receipt(envelope *e, const char *from, const char *to)
{
    memset(e, 0, sizeof(*e));
    e->v = 1;
    strcpy(e->type, "receipt");
    strcpy(e->msgId, ID2);
    strcpy(e->from, from);
    strcpy(e->to, to);
    strcpy(e->sentAt, T1);
    strcpy(e->expiresAt, T2);
    strcpy(e->ref, ID1);
    strcpy(e->state, "injected");
}

/* A deep copy, so one mutation never leaks into the next case. */
static void copy_env(envelope *dst, const envelope *src)
{
    *dst = *src;
    dst->body = src->body != NULL ? g_memdup2(src->body, src->body_len + 1) : NULL;
}

static mode_t mode_of(const char *path)
{
    struct stat st;

    assert_int_equal(stat(path, &st), 0);
    return st.st_mode & 07777;
}

/* ---- keys --------------------------------------------------------------- */

static void test_keygen_files(void **state)
{
    struct fx *f = *state;
    char *key = fx_path(f, "new.key"), *pub = fx_path(f, "new.key.pub");
    char *text = NULL, *err = NULL;
    mode_t old = umask(0);

    /* A lax umask must not widen the secret's mode, a strict one must not
	 * narrow the public key's. */
    assert_int_equal(sig_keygen(key, &err), 0);
    assert_null(err);
    umask(0277);
    g_remove(key);
    g_remove(pub);
    assert_int_equal(sig_keygen(key, &err), 0);
    umask(old);
    assert_int_equal(mode_of(key), 0600);
    assert_int_equal(mode_of(pub), 0644);

    assert_true(g_file_get_contents(key, &text, NULL, NULL));
    assert_true(g_str_has_prefix(text, "ed25519-secret "));
    assert_int_equal(strlen(text), strlen("ed25519-secret ") + 88 + 1);
    assert_int_equal(text[strlen(text) - 1], '\n');
    g_free(text);
    assert_true(g_file_get_contents(pub, &text, NULL, NULL));
    assert_true(g_str_has_prefix(text, "ed25519 "));
    assert_int_equal(strlen(text), strlen("ed25519 ") + 44 + 1);
    assert_int_equal(text[strlen(text) - 1], '\n');
    g_free(text);
    g_free(key);
    g_free(pub);
}

static void test_keygen_refuses_overwrite(void **state)
{
    struct fx *f = *state;
    char *pub = g_strdup_printf("%s.pub", f->alpha);
    char *before = NULL, *after = NULL, *err = NULL;
    char *lone = fx_path(f, "lone.key"), *lonepub = fx_path(f, "lone.key.pub");

    assert_true(g_file_get_contents(f->alpha, &before, NULL, NULL));
    assert_int_equal(sig_keygen(f->alpha, &err), -1);
    assert_non_null(err);
    assert_non_null(strstr(err, "already exists"));
    g_free(err);
    assert_true(g_file_get_contents(f->alpha, &after, NULL, NULL));
    assert_string_equal(before, after);
    g_free(before);
    g_free(after);

    /* Only PATH.pub exists: refused, and no secret is left behind that
	 * would not match the old public key. */
    put_file(lonepub, "ed25519 something\n", 0644);
    err = NULL;
    assert_int_equal(sig_keygen(lone, &err), -1);
    assert_non_null(strstr(err, "already exists"));
    g_free(err);
    assert_false(g_file_test(lone, G_FILE_TEST_EXISTS));

    /* A dangling symlink at PATH is not followed. */
    g_remove(lonepub);
    assert_int_equal(symlink("/nonexistent/fleetfs-target", lone), 0);
    err = NULL;
    assert_int_equal(sig_keygen(lone, &err), -1);
    g_free(err);
    assert_false(g_file_test(lonepub, G_FILE_TEST_EXISTS));
    g_free(pub);
    g_free(lone);
    g_free(lonepub);
}

static void test_load_refuses_open_modes(void **state)
{
    struct fx *f = *state;
    static const mode_t bad[] = {0644, 0640, 0604, 0660, 0601, 0610};
    char *err = NULL;
    sig_key *k;
    size_t i;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(chmod(f->alpha, bad[i]), 0);
        k = sig_load_secret(f->alpha, &err);
        assert_null(k);
        assert_non_null(err);
        assert_non_null(strstr(err, "chmod 600"));
        g_free(err);
        err = NULL;
    }
    assert_int_equal(chmod(f->alpha, 0400), 0);
    k = sig_load_secret(f->alpha, &err);
    assert_non_null(k);
    sig_key_free(k);
    assert_int_equal(chmod(f->alpha, 0600), 0);
}

static void test_load_refuses_bad_content(void **state)
{
    struct fx *f = *state;
    char *p = fx_path(f, "bad.key"), *text = NULL, *err = NULL;
    char *pub = g_strdup_printf("%s.pub", f->alpha);
    static const char *const bad[] = {
        "",
        "ed25519-secret\n",
        "ed25519-secret \n",
        "ed25519-secret AAAA\n",
        "ed25519-secret !!!!\n",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG\n",
    };
    size_t i;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        g_remove(p);
        put_file(p, bad[i], 0600);
        assert_null(sig_load_secret(p, &err));
        assert_non_null(err);
        g_free(err);
        err = NULL;
    }
    /* A public key where the secret should be. */
    assert_true(g_file_get_contents(pub, &text, NULL, NULL));
    g_remove(p);
    put_file(p, text, 0600);
    assert_null(sig_load_secret(p, &err));
    g_free(err);
    err = NULL;
    g_free(text);

    /* A secret whose public half was altered. */
    assert_true(g_file_get_contents(f->alpha, &text, NULL, NULL));
    text[strlen("ed25519-secret ") + 60] = text[strlen("ed25519-secret ") + 60] == 'A' ? 'B' : 'A';
    g_remove(p);
    put_file(p, text, 0600);
    assert_null(sig_load_secret(p, &err));
    g_free(err);
    err = NULL;
    g_free(text);

    /* Missing, and a directory. */
    g_remove(p);
    assert_null(sig_load_secret(p, &err));
    g_free(err);
    err = NULL;
    assert_null(sig_load_secret(f->trust, &err));
    g_free(err);
    g_free(p);
    g_free(pub);
}

/* ---- signatures --------------------------------------------------------- */

static void test_round_trip(void **state)
{
    struct fx *f = *state;
    envelope e, d;
    char why[128], *js;
    size_t len;

    make_coord(&e, "alpha", "beta");
    assert_int_equal(sig_sign(f->ka, &e), 0);
    assert_int_equal(strlen(e.sig), 88);
    assert_int_equal(sig_verify(f->t, &e), SIG_OK);
    strcpy(e.replyTo, ID2);
    assert_int_equal(sig_verify(f->t, &e), SIG_BAD);
    assert_int_equal(sig_sign(f->ka, &e), 0);
    assert_int_equal(sig_verify(f->t, &e), SIG_OK);

    /* Through JSON and back: the signature covers fields, not text. */
    js = env_encode(&e, &len);
    assert_non_null(js);
    assert_int_equal(env_decode(js, len, 65536, &d, why, sizeof(why)), 0);
    assert_int_equal(sig_verify(f->t, &d), SIG_OK);
    free(js);
    env_free(&d);
    env_free(&e);

    make_receipt(&e, "beta", "alpha");
    assert_int_equal(sig_sign(f->kb, &e), 0);
    assert_int_equal(sig_verify(f->t, &e), SIG_OK);
    env_free(&e);
}

typedef void (*mutator)(envelope *e);

static void mut_v(envelope *e)
{
    e->v = 2;
}
static void mut_type(envelope *e)
{
    strcpy(e->type, "coorD");
}
static void mut_msgid(envelope *e)
{
    e->msgId[31] = e->msgId[31] == '0' ? '1' : '0';
}
static void mut_from(envelope *e)
{
    strcpy(e->from, e->from[0] == 'a' ? "beta" : "alpha");
}
static void mut_to(envelope *e)
{
    strcat(e->to, "x");
}
static void mut_sent(envelope *e)
{
    e->sentAt[5] = '0';
    e->sentAt[6] = '1';
}
static void mut_expires(envelope *e)
{
    strcpy(e->expiresAt, "2099-01-01T00:00:00.000Z");
}
static void mut_reply(envelope *e)
{
    strcpy(e->replyTo, ID2);
}
static void mut_body(envelope *e)
{
    e->body[0] ^= 0x20;
}
static void mut_body_len(envelope *e)
{
    e->body_len--;
}
static void mut_ref(envelope *e)
{
    strcpy(e->ref, ID2);
}
static void mut_state(envelope *e)
{
    strcpy(e->state, "confirmed");
}
/* Bytes moved across a field boundary: length prefixes must catch it. */
static void mut_shift(envelope *e)
{
    size_t n = strlen(e->sentAt);
    char moved = e->sentAt[n - 1];

    e->sentAt[n - 1] = '\0';
    memmove(e->expiresAt + 1, e->expiresAt, strlen(e->expiresAt) + 1);
    e->expiresAt[0] = moved;
}

static void check_mutations(struct fx *f, const envelope *signed_e, const mutator *muts, size_t n)
{
    envelope m;
    size_t i;

    for (i = 0; i < n; i++) {
        copy_env(&m, signed_e);
        muts[i](&m);
        /* mut_from may make the sender unknown or another trusted
		 * lead; either way it must not verify. */
        if (sig_verify(f->t, &m) == SIG_OK)
            fail_msg("mutation %zu still verifies", i);
        env_free(&m);
    }
}

static void test_every_field_is_covered(void **state)
{
    static const mutator coord[] = {
        mut_v,       mut_type,  mut_msgid, mut_from,     mut_to,    mut_sent,
        mut_expires, mut_reply, mut_body,  mut_body_len, mut_shift,
    };
    static const mutator receipt[] = {
        mut_v,       mut_type,  mut_msgid, mut_from,  mut_to,    mut_sent,
        mut_expires, mut_reply, mut_ref,   mut_state, mut_shift,
    };
    struct fx *f = *state;
    envelope e;

    make_coord(&e, "alpha", "beta");
    assert_int_equal(sig_sign(f->ka, &e), 0);
    check_mutations(f, &e, coord, sizeof(coord) / sizeof(coord[0]));
    env_free(&e);

    make_receipt(&e, "alpha", "beta");
    e.body = strdup("");
    assert_int_equal(sig_sign(f->ka, &e), 0);
    assert_int_equal(sig_verify(f->t, &e), SIG_OK);
    check_mutations(f, &e, receipt, sizeof(receipt) / sizeof(receipt[0]));
    /* A receipt with a body: the body is covered there too. */
    free(e.body);
    e.body = strdup("note");
    e.body_len = 4;
    assert_int_equal(sig_sign(f->ka, &e), 0);
    mut_body(&e);
    assert_int_equal(sig_verify(f->t, &e), SIG_BAD);
    env_free(&e);
}

static void test_unsigned_and_unknown(void **state)
{
    struct fx *f = *state;
    char *err = NULL;
    char *empty = fx_path(f, "empty");
    sig_trust *none;
    envelope e;

    make_coord(&e, "alpha", "beta");
    assert_int_equal(sig_verify(f->t, &e), SIG_UNSIGNED);
    assert_int_equal(sig_sign(f->ka, &e), 0);
    strcpy(e.from, "gamma");
    assert_int_equal(sig_verify(f->t, &e), SIG_UNKNOWN_KEY);
    assert_int_equal(sig_verify(NULL, &e), SIG_UNKNOWN_KEY);
    e.sig[0] = '\0';
    assert_int_equal(sig_verify(f->t, &e), SIG_UNSIGNED);

    /* An empty trust directory trusts nobody. */
    assert_int_equal(g_mkdir(empty, 0755), 0);
    none = sig_trust_load(empty, &err);
    assert_non_null(none);
    assert_int_equal(sig_trust_count(none), 0);
    strcpy(e.from, "alpha");
    assert_int_equal(sig_sign(f->ka, &e), 0);
    assert_int_equal(sig_verify(none, &e), SIG_UNKNOWN_KEY);
    sig_trust_free(none);
    env_free(&e);
    g_free(empty);
}

static void test_hostile_sig_strings(void **state)
{
    struct fx *f = *state;
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    static const char *const bad[] = {
        "x",
        "====",
        "!!!!",
        "AAAA",
        "AAAA====",
        /* 63 bytes, 65 bytes, 64 zero bytes, and unpadded 64 bytes */
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==",
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA===",
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA A==",
        "-_-_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==",
    };
    envelope e, m;
    char good[100];
    size_t i, pos;

    make_coord(&e, "alpha", "beta");
    assert_int_equal(sig_sign(f->ka, &e), 0);
    strcpy(good, e.sig);
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        g_strlcpy(e.sig, bad[i], sizeof(e.sig));
        assert_int_equal(sig_verify(f->t, &e), SIG_BAD);
    }
    /* The field filled to the last byte with no terminator. */
    memset(e.sig, 'A', sizeof(e.sig));
    assert_int_equal(sig_verify(f->t, &e), SIG_BAD);
    /* Overlong: the good signature with more after it. */
    snprintf(e.sig, sizeof(e.sig), "%sAAAA", good);
    assert_int_equal(sig_verify(f->t, &e), SIG_BAD);
    /* Every other spelling of every character of the good signature,
	 * including the padding bits of the last group: one signature, one
	 * spelling. */
    for (pos = 0; pos < strlen(good); pos++) {
        for (i = 0; i < 64; i++) {
            if (b64[i] == good[pos])
                continue;
            copy_env(&m, &e);
            strcpy(m.sig, good);
            m.sig[pos] = b64[i];
            if (sig_verify(f->t, &m) != SIG_BAD)
                fail_msg("sig with [%zu]='%c' accepted", pos, b64[i]);
            env_free(&m);
        }
    }
    strcpy(e.sig, good);
    assert_int_equal(sig_verify(f->t, &e), SIG_OK);
    env_free(&e);
}

static void test_key_cannot_sign_for_another_lead(void **state)
{
    struct fx *f = *state;
    envelope e;

    /* alpha's key, claiming to be beta. */
    make_coord(&e, "beta", "alpha");
    assert_int_equal(sig_sign(f->ka, &e), 0);
    assert_int_equal(sig_verify(f->t, &e), SIG_BAD);
    assert_int_equal(sig_sign(f->kb, &e), 0);
    assert_int_equal(sig_verify(f->t, &e), SIG_OK);
    env_free(&e);

    assert_true(sig_key_matches(f->t, "alpha", f->ka));
    assert_false(sig_key_matches(f->t, "beta", f->ka));
    assert_false(sig_key_matches(f->t, "gamma", f->ka));
    assert_false(sig_key_matches(NULL, "alpha", f->ka));
}

/* SPEC section 10: an agent's id names its host, and only that host's key
 * signs for it; a receipt's recipient is signed too. */
static void test_agent_ids_sign_with_their_host_key(void **state)
{
    struct fx *f = *state;
    envelope e, m;

    /* w1@alpha signed by alpha: believed; by beta: refused */
    make_coord(&e, "w1@alpha", "w2@beta");
    assert_int_equal(sig_sign(f->ka, &e), 0);
    assert_int_equal(sig_verify(f->t, &e), SIG_OK);
    assert_int_equal(sig_sign(f->kb, &e), 0);
    assert_int_equal(sig_verify(f->t, &e), SIG_BAD);
    /* a host nobody trusts */
    strcpy(e.from, "w1@gamma");
    assert_int_equal(sig_sign(f->ka, &e), 0);
    assert_int_equal(sig_verify(f->t, &e), SIG_UNKNOWN_KEY);
    /* not an id at all: no key is looked up */
    strcpy(e.from, "w1@alpha@beta");
    assert_int_equal(sig_sign(f->ka, &e), 0);
    assert_int_equal(sig_verify(f->t, &e), SIG_UNKNOWN_KEY);
    /* a broadcast from alpha's lead */
    strcpy(e.from, "alpha");
    strcpy(e.to, "group:all");
    assert_int_equal(sig_sign(f->ka, &e), 0);
    assert_int_equal(sig_verify(f->t, &e), SIG_OK);
    /* moving the signed message to another agent of the same host breaks it */
    copy_env(&m, &e);
    strcpy(m.from, "w1@alpha");
    assert_int_equal(sig_verify(f->t, &m), SIG_BAD);
    env_free(&m);
    env_free(&e);

    /* receipts: beta's agent w1 got it; the recipient is signed */
    make_receipt(&e, "beta", "w9@alpha");
    strcpy(e.recipient, "w1@beta");
    assert_int_equal(sig_sign(f->kb, &e), 0);
    assert_int_equal(sig_verify(f->t, &e), SIG_OK);
    copy_env(&m, &e);
    strcpy(m.recipient, "w2@beta");
    assert_int_equal(sig_verify(f->t, &m), SIG_BAD);
    m.recipient[0] = '\0'; /* stripped */
    assert_int_equal(sig_verify(f->t, &m), SIG_BAD);
    env_free(&m);
    /* a receipt without a recipient (every lead's, and every old one)
     * verifies as it always did */
    make_receipt(&e, "beta", "alpha");
    assert_int_equal(sig_sign(f->kb, &e), 0);
    assert_int_equal(sig_verify(f->t, &e), SIG_OK);
}

/* ---- trust directory ---------------------------------------------------- */

static void test_trust_dir(void **state)
{
    struct fx *f = *state;
    char *pubtext = NULL, *err = NULL, *p;
    sig_trust *t;
    struct {
        const char *name;
        const char *text; /* NULL: alpha's public key */
        mode_t mode;
    } files[] = {
        {"Upper.pub", NULL, 0644}, /* invalid lead name */
        {"-dash.pub", NULL, 0644},
        {".pub", NULL, 0644},
        {"a b.pub", NULL, 0644},
        {"gamma.txt", NULL, 0644}, /* not .pub */
        {"gamma.pub.bak", NULL, 0644},
        {"delta.pub", "ed25519 not-base64\n", 0644},
        {"eps.pub", "ed25519 AAAA\n", 0644},
        {"zeta.pub", "", 0644},
        {"eta.pub", "ssh-ed25519 AAAA\n", 0644},
        {"iota.pub", NULL, 0666}, /* writable by anyone */
        {"nu.pub", NULL, 0664},   /* writable by the group */
        {"xi.pub", NULL, 0644},   /* chowned to another user below */
        {"kappa.pub", "\x1b]0;pwned\x07", 0644},
        {"crlf.pub", "", 0644}, /* filled below: trailing \r\n */
        {"nonl.pub", "", 0644}, /* filled below: no newline */
    };
    size_t i;

    p = g_strdup_printf("%s.pub", f->alpha);
    assert_true(g_file_get_contents(p, &pubtext, NULL, NULL));
    g_free(p);
    for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char *text = files[i].text ? g_strdup(files[i].text) : g_strdup(pubtext);

        if (strcmp(files[i].name, "crlf.pub") == 0) {
            g_free(text);
            text = g_strdup_printf("%.*s\r\n", (int)strlen(pubtext) - 1, pubtext);
        } else if (strcmp(files[i].name, "nonl.pub") == 0) {
            g_free(text);
            text = g_strndup(pubtext, strlen(pubtext) - 1);
        }
        p = g_build_filename(f->trust, files[i].name, NULL);
        put_file(p, text, files[i].mode);
        g_free(p);
        g_free(text);
    }
    p = g_build_filename(f->trust, "xi.pub", NULL);
    if (geteuid() == 0) /* as root (CI): a file that belongs to someone else */
        assert_int_equal(chown(p, 12345, 12345), 0);
    else
        assert_int_equal(chmod(p, 0664), 0); /* cannot chown: fail it the other way */
    g_free(p);
    p = g_build_filename(f->trust, "theta.pub", NULL);
    assert_int_equal(g_mkdir(p, 0755), 0); /* a directory */
    g_free(p);
    p = g_build_filename(f->trust, "lambda.pub", NULL);
    assert_int_equal(symlink("/nonexistent/x.pub", p), 0);
    g_free(p);
    /* A secret key in the trust dir is not a public key. */
    p = g_build_filename(f->trust, "mu.pub", NULL);
    {
        char *sec = NULL;

        assert_true(g_file_get_contents(f->alpha, &sec, NULL, NULL));
        put_file(p, sec, 0600);
        memset(sec, 0, strlen(sec));
        g_free(sec);
    }
    g_free(p);

    t = sig_trust_load(f->trust, &err);
    assert_non_null(t);
    assert_null(err);
    assert_true(sig_trust_has(t, "alpha"));
    assert_true(sig_trust_has(t, "beta"));
    assert_true(sig_trust_has(t, "crlf"));
    assert_true(sig_trust_has(t, "nonl"));
    assert_int_equal(sig_trust_count(t), 4);
    assert_false(sig_trust_has(t, "Upper"));
    assert_false(sig_trust_has(t, "gamma"));
    assert_false(sig_trust_has(t, "delta"));
    assert_false(sig_trust_has(t, "iota"));
    assert_false(sig_trust_has(t, "nu"));
    assert_false(sig_trust_has(t, "xi"));
    assert_false(sig_trust_has(t, "mu"));
    assert_false(sig_trust_has(t, NULL));
    assert_false(sig_trust_has(NULL, "alpha"));
    sig_trust_free(t);

    /* Reloading sees removals. */
    p = g_build_filename(f->trust, "beta.pub", NULL);
    g_remove(p);
    g_free(p);
    t = sig_trust_load(f->trust, &err);
    assert_non_null(t);
    assert_false(sig_trust_has(t, "beta"));
    assert_true(sig_trust_has(t, "alpha"));
    sig_trust_free(t);

    /* A missing directory is an error with the path in it. */
    p = fx_path(f, "nope");
    assert_null(sig_trust_load(p, &err));
    assert_non_null(err);
    assert_non_null(strstr(err, p));
    g_free(err);
    g_free(p);
    g_free(pubtext);
}

/* The trusted keys follow the directory: a .pub created empty and filled
 * in place afterwards (as cp and scp write it; the directory's mtime does
 * not move for the filling) is trusted once whole; a removed one is not
 * trusted any more; without force, the directory is looked at at most once
 * per SIG_TRUST_CHECK_MS. */
static void test_trust_follows_the_directory(void **state)
{
    struct fx *f = *state;
    char *err = NULL, *pubtext = NULL, *p, *gamma;
    int64_t stamp, checked = 0;
    int fd;

    stamp = sig_trust_stamp(f->trust);
    assert_int_not_equal(stamp, -1);
    assert_int_equal(sig_trust_refresh(&f->t, f->trust, false, &stamp, &checked, false, &err), 0);
    assert_int_not_equal(checked, 0);

    gamma = g_build_filename(f->trust, "gamma.pub", NULL);
    put_file(gamma, "", 0644); /* created, not yet written */
    assert_int_equal(sig_trust_refresh(&f->t, f->trust, false, &stamp, &checked, true, &err), 1);
    assert_false(sig_trust_has(f->t, "gamma"));

    p = g_strdup_printf("%s.pub", f->alpha);
    assert_true(g_file_get_contents(p, &pubtext, NULL, NULL));
    g_free(p);
    fd = open(gamma, O_WRONLY | O_TRUNC);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, pubtext, strlen(pubtext)), (ssize_t)strlen(pubtext));
    close(fd);
    assert_int_equal(sig_trust_refresh(&f->t, f->trust, false, &stamp, &checked, true, &err), 1);
    assert_true(sig_trust_has(f->t, "gamma"));
    /* nothing changed: not read again */
    assert_int_equal(sig_trust_refresh(&f->t, f->trust, false, &stamp, &checked, true, &err), 0);

    /* removed: no longer trusted, once looked at; not before the second is up */
    p = g_build_filename(f->trust, "beta.pub", NULL);
    assert_int_equal(g_remove(p), 0);
    g_free(p);
    assert_int_equal(sig_trust_refresh(&f->t, f->trust, false, &stamp, &checked, false, &err), 0);
    assert_true(sig_trust_has(f->t, "beta"));
    g_usleep((SIG_TRUST_CHECK_MS + 50) * 1000);
    assert_int_equal(sig_trust_refresh(&f->t, f->trust, false, &stamp, &checked, false, &err), 1);
    assert_false(sig_trust_has(f->t, "beta"));
    assert_true(sig_trust_has(f->t, "alpha"));

    /* a directory that cannot be read: -1 with the reason; the keys stay */
    p = fx_path(f, "trusted.moved");
    assert_int_equal(rename(f->trust, p), 0);
    assert_int_equal(sig_trust_refresh(&f->t, f->trust, false, &stamp, &checked, true, &err), -1);
    assert_non_null(err);
    g_free(err);
    err = NULL;
    assert_true(sig_trust_has(f->t, "alpha"));
    /* and it is not read again per call while it stays so */
    assert_int_equal(sig_trust_refresh(&f->t, f->trust, false, &stamp, &checked, true, &err), 0);
    assert_int_equal(rename(p, f->trust), 0);
    g_free(p);
    g_free(pubtext);
    g_free(gamma);
}

/* The stamp by an inotify watch (trustwatch.h) misses nothing the full
 * stamp saw: a key rewritten in place (same name, same size), a mode made
 * lax, a key added and removed, each noticed at once (force); a .pub that
 * is a symlink turns the watch off for the directory (a change to its
 * target is not an event here) and the change behind it is still seen. */
static void test_trust_watch_misses_nothing(void **state)
{
    struct fx *f = *state;
    char *err = NULL, *beta = g_build_filename(f->trust, "beta.pub", NULL);
    char *text = NULL, *p, *outside, *link;
    int64_t stamp, checked = 0;
    bool local;

    stamp = sig_trust_stamp(f->trust);
    assert_int_not_equal(stamp, -1);
    assert_int_equal(sig_trust_refresh(&f->t, f->trust, false, &stamp, &checked, true, &err), 0);
    local = tw_watching(f->trust); /* on ext4, tmpfs and the like */

    /* beta.pub rewritten in place with alpha's key: same size, new key */
    p = g_strdup_printf("%s.pub", f->alpha);
    assert_true(g_file_get_contents(p, &text, NULL, NULL));
    g_free(p);
    {
        int fd = open(beta, O_WRONLY);
        assert_true(fd >= 0);
        assert_int_equal(pwrite(fd, text, strlen(text), 0), (ssize_t)strlen(text));
        close(fd);
    }
    assert_int_equal(sig_trust_refresh(&f->t, f->trust, false, &stamp, &checked, true, &err), 1);
    assert_int_equal(sig_trust_refresh(&f->t, f->trust, false, &stamp, &checked, true, &err), 0);

    /* a lax mode: the key is skipped */
    assert_int_equal(chmod(beta, 0666), 0);
    assert_int_equal(sig_trust_refresh(&f->t, f->trust, false, &stamp, &checked, true, &err), 1);
    assert_false(sig_trust_has(f->t, "beta"));
    assert_int_equal(tw_watching(f->trust), local);

    /* a symlinked .pub: its target changes without an event here */
    outside = fx_path(f, "gamma-outside.pub");
    put_file(outside, "", 0644);
    link = g_build_filename(f->trust, "gamma.pub", NULL);
    assert_int_equal(symlink(outside, link), 0);
    assert_int_equal(sig_trust_refresh(&f->t, f->trust, false, &stamp, &checked, true, &err), 1);
    assert_false(sig_trust_has(f->t, "gamma"));
    assert_false(tw_watching(f->trust));
    put_file(outside, text, 0644);
    assert_int_equal(sig_trust_refresh(&f->t, f->trust, false, &stamp, &checked, true, &err), 1);
    assert_true(sig_trust_has(f->t, "gamma"));

    /* the symlink gone: the watch again where it can be */
    assert_int_equal(g_remove(link), 0);
    assert_int_equal(sig_trust_refresh(&f->t, f->trust, false, &stamp, &checked, true, &err), 1);
    assert_false(sig_trust_has(f->t, "gamma"));
    (void)sig_trust_stamp(f->trust);
    assert_int_equal(tw_watching(f->trust), local);
    assert_int_equal(sig_trust_refresh(&f->t, f->trust, false, &stamp, &checked, true, &err), 0);
    g_free(link);
    g_free(outside);
    g_free(text);
    g_free(beta);
}

static void test_result_names(void **state)
{
    (void)state;
    assert_string_equal(sig_result_name(SIG_OK), "ok");
    assert_string_equal(sig_result_name(SIG_UNSIGNED), "unsigned");
    assert_string_equal(sig_result_name(SIG_UNKNOWN_KEY), "unknown-key");
    assert_string_equal(sig_result_name(SIG_BAD), "bad-signature");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_keygen_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keygen_refuses_overwrite, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_refuses_open_modes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_refuses_bad_content, setup, teardown),
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_every_field_is_covered, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unsigned_and_unknown, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hostile_sig_strings, setup, teardown),
        cmocka_unit_test_setup_teardown(test_key_cannot_sign_for_another_lead, setup, teardown),
        cmocka_unit_test_setup_teardown(test_agent_ids_sign_with_their_host_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trust_dir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trust_follows_the_directory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trust_watch_misses_nothing, setup, teardown),
        cmocka_unit_test(test_result_names),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
