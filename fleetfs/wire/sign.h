/* SPDX-License-Identifier: Apache-2.0 */
/* sign.h — ed25519 keys, the trust directory, and signing and verifying
 * envelopes (SPEC sections 4 and 9).
 *
 * Why signatures at all: the broker is shared, and anyone holding a broker
 * login can publish to any mailbox. Without a signature a message's "from"
 * is a claim, and what arrives is typed into a terminal. With one, a message
 * is believed only if the key trusted for its sender signed exactly these
 * fields, so a broker login alone cannot make a pane type anything.
 *
 * File formats (text, one line, base64 = RFC 4648 standard alphabet with
 * padding; trailing whitespace is ignored when reading):
 *
 *   PATH       mode 0600   "ed25519-secret <base64 of the 64-byte secret>\n"
 *                          (libsodium layout: 32-byte seed, then the public
 *                          key; loading checks the two agree)
 *   PATH.pub   mode 0644   "ed25519 <base64 of the 32-byte public key>\n"
 *
 * The trust directory holds one PATH.pub per trusted lead, renamed to
 * <coord_id>.pub; the file name is the identity it vouches for, exactly as
 * in SSH's known_hosts the host name is.
 *
 * Signature: e->sig is the base64 of crypto_sign_detached over
 * env_signing_fields(e) (88 characters); it never covers e->sig itself.
 *
 * Ownership: a sig_key and a sig_trust are immutable once loaded, so any
 * number of threads may use one at the same time. To reload trust (SIGHUP),
 * load a new sig_trust and swap the pointer under the caller's own lock;
 * free the old one when nobody can still hold it. Errors come back as a
 * g_malloc'd *err (g_free) that names the file and says what to do. */
#ifndef FLEETFS_SIGN_H
#define FLEETFS_SIGN_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include "fleetfs/wire/envelope.h"

typedef struct sig_key sig_key;
typedef struct sig_trust sig_trust;

typedef enum {
    SIG_OK = 0,
    SIG_UNSIGNED,    /* e->sig is empty */
    SIG_UNKNOWN_KEY, /* no key trusted for the host of e->from */
    SIG_BAD,         /* malformed sig, or it does not verify */
} sig_result;

/* Writes a fresh keypair: the secret to path (0600) and the public key to
 * path.pub (0644). Refuses to overwrite either (O_EXCL); on any failure
 * nothing it created is left behind. 0 ok, -1 and *err. */
int sig_keygen(const char *path, char **err);

/* Loads a secret key file. Refuses a file any group/other permission bit
 * is set on (it may already have leaked: chmod 600 and consider a new key),
 * a non-regular file, and anything not in the format above. NULL and *err
 * on failure. */
sig_key *sig_load_secret(const char *path, char **err);
/* Wipes the secret and frees. NULL is fine. */
void sig_key_free(sig_key *k);

/* Like ssh's StrictModes: true (and why) when st — a trust file or
 * directory, or the state directory — belongs to neither this user nor
 * root, or is writable by its group or by anyone. */
struct stat;
bool sig_lax_owner_or_mode(const struct stat *st, char *why, size_t whylen);
/* Reads every <coord_id>.pub in dir whose coord_id is a valid lead name.
 * Other files are ignored; a malformed or world-writable .pub, or an
 * invalid name ending in .pub, is skipped with a warning. An unreadable
 * directory is an error (NULL and *err); an empty one is not (nothing is
 * trusted). */
sig_trust *sig_trust_load(const char *dir, char **err);
/* The same without the per-file warnings: for a second reader of the same
 * directory (presence), so each warning is logged once. */
sig_trust *sig_trust_load_quiet(const char *dir, char **err);
/* A stamp of the trust directory as it is now: its own times and, for
 * every .pub in it, the name, inode, size, owner, mode and times. It
 * changes when a key file is added, removed, or written in place (a .pub
 * created empty and filled afterwards, as cp and scp do), which the
 * directory's mtime alone misses. Take it BEFORE reading the directory,
 * so a change made during the read shows as a change next time. -1 when
 * the directory cannot be read. */
int64_t sig_trust_stamp(const char *dir);
/* Keeps *t following dir: when its stamp (sig_trust_stamp) differs from
 * *stamp, the directory is read again into *t and *stamp is updated (also
 * when the read fails, so a broken directory is not re-read per message).
 * Looks at most once per SIG_TRUST_CHECK_MS (*checked_ms, monotonic ms,
 * holds the last look) unless force. A removed .pub is so no longer
 * trusted within that time, and one added or filled in is trusted.
 * 1 re-read, 0 unchanged (or not looked), -1 the read failed: *t is kept,
 * *err says why (free it). */
#define SIG_TRUST_CHECK_MS 1000
int sig_trust_refresh(sig_trust **t, const char *dir, bool warn, int64_t *stamp,
                      int64_t *checked_ms, bool force, char **err);
bool sig_trust_has(const sig_trust *t, const char *coord_id);
/* How many keys were loaded (for the log and status). */
size_t sig_trust_count(const sig_trust *t);
void sig_trust_free(sig_trust *t);

/* Fills e->sig. 0 ok, -1 when out of memory or libsodium cannot start. */
int sig_sign(const sig_key *k, envelope *e);
/* Checks e->sig against the key trusted for the host of e->from
 * (id_host: a coord_id is its own host, w1@alpha's is alpha); a from that is
 * not an id is SIG_UNKNOWN_KEY. t NULL trusts nobody. */
sig_result sig_verify(const sig_trust *t, const envelope *e);
/* "ok", "unsigned", "unknown-key", "bad-signature". Static storage. */
const char *sig_result_name(sig_result r);

/* The same for heartbeats (envelope.h: env_heartbeat); h->from names the
 * key that must have signed. */
int sig_sign_hb(const sig_key *k, env_heartbeat *h);
sig_result sig_verify_hb(const sig_trust *t, const env_heartbeat *h);
/* With h->ext, sig_sign_hb fills h->asig too (over
 * env_hb_agents_signing_fields); sig_verify_hb checks sig only, exactly as
 * a fleetfs before agents does. This checks asig, with the key trusted for
 * h->from: SIG_UNSIGNED when asig is empty. */
sig_result sig_verify_hb_agents(const sig_trust *t, const env_heartbeat *h);
/* With h->has_profiles, sig_sign_hb fills h->psig too (over
 * env_hb_profiles_signing_fields); this checks it likewise. */
sig_result sig_verify_hb_profiles(const sig_trust *t, const env_heartbeat *h);
/* With h->has_group_iv, sig_sign_hb also fills gsig (over
 * env_hb_group_signing_fields); this checks it likewise. */
sig_result sig_verify_hb_group(const sig_trust *t, const env_heartbeat *h);

/* Any other signed record (fleetfs/wire/control.h): sign the bytes its
 * own *_signing_fields gave into out (base64, at least 89 bytes), and
 * verify b64 (at most b64max bytes) over them with the key trusted for
 * from. The record's fields must begin with its version and type, so a
 * signature over one kind of record never verifies as another. */
int sig_sign_bytes(const sig_key *k, const unsigned char *buf, size_t len, char *out, size_t outsz);
sig_result sig_verify_bytes(const sig_trust *t, const char *from, const char *b64, size_t b64max,
                            const unsigned char *buf, size_t len);

/* Extras. */
/* True when k's public key is the one t trusts for coord_id: a daemon checks
 * at start that peers holding the same trust directory will believe it. */
bool sig_key_matches(const sig_trust *t, const char *coord_id, const sig_key *k);

#endif
