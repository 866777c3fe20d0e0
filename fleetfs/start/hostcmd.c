/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/start/hostcmd.c — the operator's commands (hostcmd.h): `fleetfs
 * declare NAME [-o opt,...]`, and `fleetfs dlq list | show ID | redrive ID |
 * purge [-o opt,...]`, the operator's hands on fleet.dlq (broker/dlq.h).
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
#include <time.h>

#include <glib.h>

#include <jansson.h>

#include "broker/declare.h"
#include "broker/dlq.h"
#include "fleetfs/config/options.h"
#include "fleetfs/wire/envelope.h"
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

static int hc_options(fs_opts *o, const char *list, const char *who)
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
            fprintf(stderr, "%s: %s\n", who, err);
            g_free(err);
            rc = -1;
        }
    }
    g_strfreev(items);
    return rc;
}

/* The -o lists from argv[first] on (each "-o LIST"), then the broker
 * config they and the environment make (cfg->uris to g_strfreev); -1 on
 * a bad word (said on stderr as WHO's) or a stray argument: usage. */
static int hc_operator_cfg(fs_opts *o, int argc, char **argv, int first, const char *who,
                           br_config *cfg)
{
    const char *env;
    for (int i = first; i < argc; i++) {
        if (strcmp(argv[i], "-o") != 0 || i + 1 >= argc || hc_options(o, argv[++i], who) < 0)
            return -1;
    }
    env = getenv(o->broker_uri_env);
    memset(cfg, 0, sizeof *cfg);
    cfg->uris = uri_split(env && *env     ? env
                          : o->broker_uri ? o->broker_uri
                                          : "amqp://localhost:5672");
    cfg->vhost = o->vhost;
    cfg->queue_type = o->queue_type;
    cfg->max_length = o->max_length;
    cfg->message_ttl_ms = o->message_ttl_ms;
    cfg->ca = o->ca;
    cfg->uri_env = o->broker_uri_env;
    return 0;
}

int hc_declare_main(int argc, char **argv)
{
    fs_opts o;
    br_config cfg;
    char why[768], made[96];
    int rc = 2;

    opts_init(&o);
    if (argc < 3 || !name_valid(argv[2]))
        goto done;
    if (hc_operator_cfg(&o, argc, argv, 3, "fleetfs declare", &cfg) < 0)
        goto done;
    rc = br_declare_host(&cfg, argv[2], why, sizeof why, made, sizeof made) < 0 ? 1 : 0;
    if (rc)
        fprintf(stderr, "fleetfs declare: %s\n", why);
    else
        printf("declared lead.%s.inbox, lead.%s.receipts, control.%s and lead.%s.dead (%s); "
               "fleet.dlx, fleet.dlq, fleet.dead, fleet.roster, fleet.msg, fleet.control and "
               "fleet.claims are there\n",
               argv[2], argv[2], argv[2], argv[2], made);
    g_strfreev(cfg.uris);
done:
    opts_free(&o);
    return rc == 2 ? hc_usage() : rc;
}

/* ---- fleetfs dlq ------------------------------------------------------- */

static int dq_usage(void)
{
    fprintf(stderr,
            "usage: fleetfs dlq list | show ID | redrive ID | purge [-o opt[,opt...]]\n"
            "  the operator's hands on fleet.dlq, with a login that may read it (the URI in\n"
            "  $FLEET_BROKER_URI, or the variable broker_uri_env names; options that matter:\n"
            "  vhost, ca, broker_uri_env).  ID: a dead letter's msgId, or #N (its place in\n"
            "  list).  list: every dead letter, oldest first (they stay); show ID: each copy\n"
            "  of it, whole; redrive ID: its first copy published again, the same bytes and\n"
            "  msgId, to the queue it died in, and removed from fleet.dlq once the broker\n"
            "  confirmed it; purge: fleet.dlq emptied.  Exit status: 0 done, 1 the broker\n"
            "  refused or is unreachable, 2 usage, 3 no such dead letter, 4 not redriven\n");
    return 2;
}

typedef struct {
    const char *op; /* list, show, redrive */
    const char *want;
    unsigned matched;
    unsigned shown;
    fe_code redriven;
    bool redrive_done;
    char id[40];
} dq_walk;

/* A letter's id (its envelope's msgId, else its message_id when that is
 * one, else #N), and what its body says, for list and show. */
static void dq_fields(const br_dead_letter *l, unsigned index, char *id, size_t idn, char *from,
                      char *to, char *type, size_t fn)
{
    json_t *j = json_loadb(l->body, l->len, 0, NULL);
    const char *v;
    snprintf(from, fn, "-");
    snprintf(to, fn, "-");
    snprintf(type, fn, "%s", l->type[0] ? l->type : "-");
    id[0] = '\0';
    if (json_is_object(j)) {
        if ((v = json_string_value(json_object_get(j, "msgId"))) && env_id_valid(v))
            snprintf(id, idn, "%s", v);
        if ((v = json_string_value(json_object_get(j, "from"))) && id_valid(v))
            snprintf(from, fn, "%s", v);
        if ((v = json_string_value(json_object_get(j, "to"))) && addr_parse(v, &(addr){0}))
            snprintf(to, fn, "%s", v);
        if ((v = json_string_value(json_object_get(j, "type"))) && name_valid(v))
            snprintf(type, fn, "%s", v);
    }
    json_decref(j);
    if (!id[0] && env_id_valid(l->death.msg_id))
        snprintf(id, idn, "%s", l->death.msg_id);
    if (!id[0])
        snprintf(id, idn, "#%u", index + 1);
}

static void dq_time(int64_t s, char *out, size_t n)
{
    struct tm tm;
    time_t t = (time_t)s;
    snprintf(out, n, "-");
    if (s > 0 && gmtime_r(&t, &tm))
        strftime(out, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static br_dlq_action dq_visit(void *ud, unsigned index, const br_dead_letter *l)
{
    dq_walk *w = ud;
    char id[40], from[128], to[128], type[128], at[40],
        pos[16]; /* from, to, type: one size (dq_fields) */
    dq_fields(l, index, id, sizeof id, from, to, type, sizeof from);
    dq_time(l->death.time_s, at, sizeof at);
    snprintf(pos, sizeof pos, "#%u", index + 1);
    if (!strcmp(w->op, "list")) {
        printf("%s %s %s %s %s from %s to %s\n", id, l->death.reason[0] ? l->death.reason : "-",
               l->death.queue[0] ? l->death.queue : "-", at, type, from, to);
        return BR_DLQ_KEEP;
    }
    if (strcmp(w->want, id) != 0 && strcmp(w->want, pos) != 0)
        return BR_DLQ_KEEP;
    w->matched++;
    snprintf(w->id, sizeof w->id, "%s", id);
    if (!strcmp(w->op, "redrive"))
        return BR_DLQ_REDRIVE;
    printf("%sid: %s\nplace: %s\nreason: %s\nqueue: %s\ntime: %s\ncount: %lld\n"
           "fleet-host: %s\nmessage_id: %s\ntype: %s\ncontent_type: %s\nfrom: %s\nto: %s\n"
           "redelivered: %s\nbody: ",
           w->matched > 1 ? "\n" : "", id, pos, l->death.reason[0] ? l->death.reason : "-",
           l->death.queue[0] ? l->death.queue : "-", at, (long long)l->death.count,
           l->death.host[0] ? l->death.host : "-", l->death.msg_id[0] ? l->death.msg_id : "-",
           l->type[0] ? l->type : "-", l->content_type[0] ? l->content_type : "-", from, to,
           l->redelivered ? "true" : "false");
    /* the bytes as they are, but no control character reaches the terminal */
    for (size_t i = 0; i < l->len; i++) {
        unsigned char c = (unsigned char)l->body[i];
        putchar(c < 0x20 || c == 0x7f ? '?' : c);
    }
    putchar('\n');
    return BR_DLQ_KEEP;
}

static void dq_redriven(void *ud, unsigned index, fe_code result, const char *detail)
{
    dq_walk *w = ud;
    (void)index;
    w->redrive_done = true;
    w->redriven = result;
    if (result == FE_OK)
        printf("redrove %s: %s (the same bytes and msgId: a receiver that consumed it already "
               "refuses it as a replay, and it comes back to fleet.dlq)\n",
               w->id, detail);
    else
        fprintf(stderr, "fleetfs dlq: %s not redriven: %s; it stays in fleet.dlq\n", w->id, detail);
}

int hc_dlq_main(int argc, char **argv)
{
    fs_opts o;
    br_config cfg;
    const char *op = argc >= 3 ? argv[2] : "";
    dq_walk w = {0};
    char why[768];
    unsigned count = 0;
    int rc = 2, first_opt = 3;
    bool needs_id = !strcmp(op, "show") || !strcmp(op, "redrive");

    opts_init(&o);
    if (!needs_id && strcmp(op, "list") != 0 && strcmp(op, "purge") != 0)
        goto done;
    if (needs_id) {
        if (argc < 4 || !argv[3][0] || argv[3][0] == '-')
            goto done;
        w.want = argv[3];
        first_opt = 4;
    }
    if (hc_operator_cfg(&o, argc, argv, first_opt, "fleetfs dlq", &cfg) < 0)
        goto done;
    w.op = op;
    if (!strcmp(op, "purge")) {
        uint32_t n = 0;
        rc = br_dlq_purge(&cfg, &n, why, sizeof why) < 0 ? 1 : 0;
        if (rc == 0)
            printf("purged %u dead letter%s from fleet.dlq\n", n, n == 1 ? "" : "s");
    } else {
        rc = br_dlq_walk(&cfg, dq_visit, dq_redriven, &w, &count, why, sizeof why) < 0 ? 1 : 0;
        if (rc == 0 && !strcmp(op, "list"))
            printf("fleet.dlq: %u dead letter%s, oldest first (listed; each stays there)\n", count,
                   count == 1 ? "" : "s");
        else if (rc == 0 && !w.matched) {
            fprintf(stderr,
                    "fleetfs dlq: no dead letter %s in fleet.dlq (%u there: fleetfs dlq "
                    "list)\n",
                    w.want, count);
            rc = 3;
        } else if (rc == 0 && !strcmp(op, "redrive") && (!w.redrive_done || w.redriven != FE_OK))
            rc = 4;
        else if (rc == 0 && !strcmp(op, "show"))
            printf("%u cop%s of %s in fleet.dlq (shown; they stay there)\n", w.matched,
                   w.matched == 1 ? "y" : "ies", w.want);
    }
    if (rc == 1)
        fprintf(stderr, "fleetfs dlq %s: %s\n", op, why);
    g_strfreev(cfg.uris);
done:
    opts_free(&o);
    return rc == 2 ? dq_usage() : rc;
}
