/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/start/hostcmd.c — `fleetfs declare NAME [-o opt,...]` (hostcmd.h).
 *
 * The fleet's arguments (queue_type, max_length, message_ttl) and where the
 * broker is (vhost, ca, broker_uri_env) are ordinary fleetfs options, read
 * and checked by options.c like a mount's, so a host added here gets
 * exactly the queues its fleetfs will declare.  The URI, with the
 * operator's password, comes from the environment as for a mount, and is
 * never printed.
 */
#include "fleetfs/start/hostcmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "broker/declare.h"
#include "fleetfs/config/options.h"
#include "fleetfs/wire/names.h"

static int hc_usage(void)
{
    fprintf(stderr,
            "usage: fleetfs declare NAME [-o opt[,opt...]]\n"
            "  makes the fleet-wide objects (when missing) and lead.NAME.inbox and\n"
            "  lead.NAME.receipts, with a login that may (the operator's), from the URI in\n"
            "  $FLEET_BROKER_URI (or the variable broker_uri_env names); options that\n"
            "  matter: vhost, queue_type, max_length, message_ttl, ca, broker_uri_env\n");
    return 2;
}

static int hc_options(fs_opts *o, const char *list)
{
    gchar **items = g_strsplit(list, ",", -1);
    int rc = 0;
    for (gchar **p = items; *p && rc == 0; p++) {
        char *eq = strchr(*p, '='), *err = NULL;
        if (!**p)
            continue;
        if (eq)
            *eq = '\0';
        if (opts_set(o, *p, eq ? eq + 1 : "", &err) < 0) {
            fprintf(stderr, "fleetfs declare: %s\n", err);
            g_free(err);
            rc = -1;
        }
    }
    g_strfreev(items);
    return rc;
}

int hc_declare_main(int argc, char **argv)
{
    fs_opts o;
    br_config cfg;
    const char *env;
    char why[768], made[96];
    int rc = 2;

    opts_init(&o);
    if (argc < 3 || !name_valid(argv[2]))
        goto done;
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "-o") != 0 || i + 1 >= argc || hc_options(&o, argv[++i]) < 0)
            goto done;
    }
    env = getenv(o.broker_uri_env);
    memset(&cfg, 0, sizeof cfg);
    cfg.uris = uri_split(env && *env ? env : o.broker_uri ? o.broker_uri : "amqp://localhost:5672");
    cfg.vhost = o.vhost;
    cfg.queue_type = o.queue_type;
    cfg.max_length = o.max_length;
    cfg.message_ttl_ms = o.message_ttl_ms;
    cfg.ca = o.ca;
    cfg.uri_env = o.broker_uri_env;
    rc = br_declare_host(&cfg, argv[2], why, sizeof why, made, sizeof made) < 0 ? 1 : 0;
    if (rc)
        fprintf(stderr, "fleetfs declare: %s\n", why);
    else
        printf("declared lead.%s.inbox, lead.%s.receipts, control.%s and lead.%s.dead (%s); "
               "fleet.dlx, fleet.dlq, fleet.dead, fleet.roster, fleet.msg and fleet.control are "
               "there\n",
               argv[2], argv[2], argv[2], argv[2], made);
    g_strfreev(cfg.uris);
done:
    opts_free(&o);
    return rc == 2 ? hc_usage() : rc;
}
