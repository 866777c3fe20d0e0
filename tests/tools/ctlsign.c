/* SPDX-License-Identifier: Apache-2.0 */
/* ctlsign — a control-plane request (SPEC section 11) signed with a given
 * key, for the far host's tests: they act as the requester before a
 * requester exists, and as a forger or a replayer after.
 *
 *   ctlsign KEYFILE --from ID --to ID [--type spawn|stop|spawned]
 *           [--profile P] [--name N] [--dir D] [--brief TEXT] [--gid G]
 *           [--ttl-ms N] [--sent-in SEC] [--msgid ID] [--tamper]
 *
 * Prints the envelope, one line of compact JSON, exactly as a requester
 * would publish it: signed by KEYFILE (the requester's own key, another
 * host's for a forgery), with a fresh msgId unless --msgid, sentAt now
 * (shifted by --sent-in) and expiresAt after --ttl-ms (default 60 s; the
 * far host refuses more than 5 minutes).  --tamper changes the name (or
 * the gid) after signing.  A `spawned` envelope gets requestId = its own
 * msgId, state ready.  The test then publishes the line with
 * `rawpub URI control.<to> --body-file F` (the same bytes again for a
 * replay).  Exit 2 on usage errors, 1 when the key cannot be read or the
 * envelope cannot be made. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "fleetfs/wire/control.h"
#include "fleetfs/wire/sign.h"

static void cs_usage(void)
{
    fprintf(stderr, "usage: ctlsign KEYFILE --from ID --to ID [--type spawn|stop|spawned]\n"
                    "         [--profile P] [--name N] [--dir D] [--brief TEXT] [--gid G]\n"
                    "         [--ttl-ms N] [--sent-in SEC] [--msgid ID] [--tamper]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *type = CTL_TYPE_SPAWN, *from = NULL, *to = NULL, *msgid = NULL;
    const char *profile = "", *name = "", *dir = "", *brief = NULL, *gid = "";
    long ttl_ms = CTL_TTL_MS, sent_in = 0;
    bool tamper = false;
    sig_key *k;
    char *err = NULL, *json;
    ctl_env e;
    size_t len;

    if (argc < 2)
        cs_usage();
    for (int i = 2; i < argc; i++) {
        const char *o = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (!strcmp(o, "--tamper")) {
            tamper = true;
            continue;
        }
        if (!v)
            cs_usage();
        i++;
        if (!strcmp(o, "--type"))
            type = v;
        else if (!strcmp(o, "--from"))
            from = v;
        else if (!strcmp(o, "--to"))
            to = v;
        else if (!strcmp(o, "--profile"))
            profile = v;
        else if (!strcmp(o, "--name"))
            name = v;
        else if (!strcmp(o, "--dir"))
            dir = v;
        else if (!strcmp(o, "--brief"))
            brief = v;
        else if (!strcmp(o, "--gid"))
            gid = v;
        else if (!strcmp(o, "--msgid"))
            msgid = v;
        else if (!strcmp(o, "--ttl-ms"))
            ttl_ms = strtol(v, NULL, 10);
        else if (!strcmp(o, "--sent-in"))
            sent_in = strtol(v, NULL, 10);
        else
            cs_usage();
    }
    if (!from || !to)
        cs_usage();
    k = sig_load_secret(argv[1], &err);
    if (!k) {
        fprintf(stderr, "ctlsign: %s\n", err);
        return 1;
    }
    ctl_init(&e, type, from, to, env_now_ms() + sent_in * 1000, 1);
    /* ctl_address clamps the lifetime to the allowed one; a test may ask
     * for more (the far host must refuse it), so expiresAt is set here */
    env_time_format(env_now_ms() + sent_in * 1000 + ttl_ms, e.expiresAt);
    if (msgid)
        g_strlcpy(e.msgId, msgid, sizeof e.msgId);
    g_strlcpy(e.profile, profile, sizeof e.profile);
    g_strlcpy(e.name, name, sizeof e.name);
    g_strlcpy(e.dir, dir, sizeof e.dir);
    g_strlcpy(e.gid, gid, sizeof e.gid);
    if (brief) {
        e.brief = strdup(brief);
        e.brief_len = strlen(brief);
    }
    if (!strcmp(type, CTL_TYPE_SPAWNED)) {
        g_strlcpy(e.requestId, e.msgId, sizeof e.requestId);
        g_strlcpy(e.state, "ready", sizeof e.state);
    }
    if (ctl_sign(k, &e) < 0) {
        fprintf(stderr, "ctlsign: cannot sign\n");
        return 1;
    }
    if (tamper) {
        if (e.name[0])
            e.name[0] = e.name[0] == 'x' ? 'y' : 'x';
        else
            g_strlcat(e.gid, "x", sizeof e.gid);
    }
    json = ctl_encode(&e, &len);
    if (!json) {
        fprintf(stderr, "ctlsign: a field cannot be encoded\n");
        return 1;
    }
    printf("%s\n", json);
    free(json);
    ctl_free(&e);
    sig_key_free(k);
    return 0;
}
