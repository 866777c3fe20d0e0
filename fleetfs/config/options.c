/* SPDX-License-Identifier: Apache-2.0 */
/* options.c — every fleetfs option in one table (curl's habit: each option
 * documented in one place), with its setter, default and help line.
 * Why the table and every setter in one file: the table, the setters and
 * the help text must not drift apart, and each setter is a few lines of
 * one shape; split by option, they would only be harder to keep in step.
 * Reading the config file onto the same setters is conffile.c's; an
 * option set as a whole (its defaults, the checks across options once all
 * are set, its free) is optset.c's (opts_int.h is what they share).
 *
 * Each value is validated completely when it is set, from -o or from the
 * config file alike, and a refusal names the option, the accepted form and
 * what was given, so a typo in fleetfs.conf reads like a compiler error
 * instead of a daemon that misbehaves later. Unknown keys are errors.
 *
 * The broker password never passes through here: broker_uri must not carry
 * one (it would end up in shell history, ps output and config backups); the
 * full URI with credentials is read from the environment variable named by
 * broker_uri_env, elsewhere. uri_redact is the one way a URI is printed.
 *
 * Paths are made absolute at set time because the daemon later changes its
 * working directory to /. */
#include "fleetfs/config/options.h"
#include "fleetfs/config/opts_int.h"
#include "fleetfs/base/duration.h"
#include "broker/uri.h"
#include "fleetfs/config/profile.h"
#include "fleetfs/wire/names.h"
#include "herdr/foreground.h"

#include <errno.h>
#include <glib.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One write(2) must reach fleetfs as one FUSE request.  The tree asks the
 * kernel for max_write 1 MiB (256 pages); a bigger write(2) arrives as
 * several requests, and one that does not start on a page boundary is cut
 * up to a page earlier.  So the largest message is one request less a
 * page: every piece that is not the last of its write(2) is then larger
 * than max_message and refused (EMSGSIZE), and the kernel ends that
 * write(2) at its first refused piece, so nothing of it is published. */
#define OPTS_MAX_MESSAGE (1024u * 1024 - 4096)

/* ---- small parsers ------------------------------------------------------ */

/* Decimal digits only, value <= max. */
static int opts_parse_uint(const char *s, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;

    if (s == NULL || *s == '\0')
        return -1;
    for (; *s != '\0'; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        v = v * 10 + (uint64_t)(*s - '0');
        if (v > max)
            return -1;
    }
    *out = v;
    return 0;
}

int opts_parse_size(const char *s, uint64_t *bytes)
{
    static const struct {
        const char *sfx;
        uint64_t mul;
    } units[] = {
        {"", 1}, {"K", 1024}, {"KiB", 1024}, {"M", 1024 * 1024}, {"MiB", 1024 * 1024},
    };
    char digits[16];
    size_t n = 0, i;
    uint64_t v;

    if (s == NULL)
        return -1;
    while (s[n] >= '0' && s[n] <= '9')
        n++;
    if (n == 0 || n >= sizeof(digits))
        return -1;
    memcpy(digits, s, n);
    digits[n] = '\0';
    for (i = 0; i < G_N_ELEMENTS(units); i++) {
        if (strcmp(s + n, units[i].sfx) == 0)
            break;
    }
    if (i == G_N_ELEMENTS(units) || opts_parse_uint(digits, UINT64_MAX / (1024 * 1024), &v) < 0)
        return -1;
    *bytes = v * units[i].mul;
    return 0;
}

/* Printable UTF-8 without control characters, 1..255 bytes. */
bool opts_text_ok(const char *s)
{
    size_t n = strlen(s), i;

    if (n == 0 || n > 255 || !text_utf8_valid(s, n))
        return false;
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];

        if (c < 0x20 || c == 0x7f)
            return false;
    }
    return true;
}

/* The value quoted for an error message, with anything unprintable escaped
 * so a hostile config cannot write escape sequences to the terminal. */
char *opts_quote(const char *value)
{
    return g_strescape(value, NULL);
}

static int opts_fail(char **err, const struct opts_def *d, const char *form, const char *value)
{
    char *q = opts_quote(value);

    *err = g_strdup_printf("%s: expected %s, got '%s'", d->key, form, q);
    g_free(q);
    return -1;
}

static char **opts_field_str(fs_opts *o, const struct opts_def *d)
{
    return (char **)((char *)o + d->off);
}

static void opts_replace(char **field, char *value)
{
    g_free(*field);
    *field = value;
}

/* ---- setters ------------------------------------------------------------ */

static int opts_set_name(fs_opts *o, const struct opts_def *d, const char *value, char **err)
{
    if (!name_valid(value))
        return opts_fail(err, d, "a lead name " OPTS_NAME_FORM, value);
    opts_replace(&o->coord_id, g_strdup(value));
    return 0;
}

/* value split at ':' into names that each pass ok() ("what", of the form
 * "form"), none twice, at most max (0: any number); "" is the empty list.
 * 0 and *out (g_strfreev), or -1 and *err naming key. */
static int opts_split_names(const char *key, const char *value, bool (*ok)(const char *),
                            const char *what, const char *form, size_t max, char ***out, char **err)
{
    char **items = value[0] == '\0' ? g_new0(char *, 1) : g_strsplit(value, ":", -1);
    size_t i, j;

    for (i = 0; items[i] != NULL; i++) {
        char *q = opts_quote(items[i]);

        if (items[i][0] == '\0')
            *err = g_strdup_printf("%s: empty name in the list (expected names "
                                   "separated by ':'), got '%s'",
                                   key, value);
        else if (!ok(items[i]))
            *err = g_strdup_printf("%s: '%s' is not %s (expected %s)", key, q, what, form);
        for (j = 0; *err == NULL && j < i; j++) {
            if (strcmp(items[i], items[j]) == 0)
                *err = g_strdup_printf("%s: '%s' is listed twice", key, q);
        }
        if (*err == NULL && max > 0 && i == max)
            *err = g_strdup_printf("%s: at most %zu names, got more", key, max);
        g_free(q);
        if (*err != NULL) {
            g_strfreev(items);
            return -1;
        }
    }
    *out = items;
    return 0;
}

static int opts_set_peers(fs_opts *o, const struct opts_def *d, const char *value, char **err)
{
    char **items;

    if (opts_split_names(d->key, value, name_valid, "a lead name", OPTS_NAME_FORM, 0, &items, err) <
        0)
        return -1;
    g_strfreev(o->peers);
    o->peers = items;
    return 0;
}

static int opts_set_spawn_from(fs_opts *o, const struct opts_def *d, const char *value, char **err)
{
    char **items;

    if (opts_split_names(d->key, value, name_valid, "a lead name", OPTS_NAME_FORM, 0, &items, err) <
        0)
        return -1;
    g_strfreev(o->spawn_from);
    o->spawn_from = items;
    return 0;
}

/* ---- agents and groups (SPEC section 10) --------------------------------- */

/* A group list: group names, at most OPTS_MAX_GROUPS, never "all" (every
 * entity is in it; listing it would suggest that leaving it out means
 * something). */
int opts_parse_groups(const char *key, const char *value, char ***out, char **err)
{
    if (opts_split_names(key, value, group_valid, "a group name", OPTS_NAME_FORM, OPTS_MAX_GROUPS,
                         out, err) < 0)
        return -1;
    if (g_strv_contains((const char *const *)*out, GROUP_ALL)) {
        *err = g_strdup_printf("%s: '" GROUP_ALL "' is every entity's group already; leave it "
                               "out",
                               key);
        g_strfreev(*out);
        *out = NULL;
        return -1;
    }
    return 0;
}

static int opts_set_groups(fs_opts *o, const struct opts_def *d, const char *value, char **err)
{
    char **items;

    if (opts_parse_groups(d->key, value, &items, err) < 0)
        return -1;
    g_strfreev(o->groups);
    o->groups = items;
    return 0;
}

static fs_agent *opts_agent_find(fs_opts *o, const char *name)
{
    for (size_t i = 0; i < o->n_agents; i++)
        if (strcmp(o->agents[i].name, name) == 0)
            return &o->agents[i];
    return NULL;
}

fs_agent *opts_agent_add(fs_opts *o, const char *name)
{
    fs_agent *a = opts_agent_find(o, name);

    if (a != NULL)
        return a;
    o->agents = g_renew(fs_agent, o->agents, o->n_agents + 1);
    a = &o->agents[o->n_agents++];
    memset(a, 0, sizeof(*a));
    a->name = g_strdup(name);
    return a;
}

void opts_agent_clear(fs_agent *a)
{
    g_free(a->name);
    g_strfreev(a->groups);
    g_free(a->target);
}

/* agents= replaces the list given before; agents with a section stay. */
static int opts_set_agents(fs_opts *o, const struct opts_def *d, const char *value, char **err)
{
    char **names;
    size_t i, kept = 0;

    if (opts_split_names(d->key, value, agent_name_valid, "an agent name", OPTS_AGENT_FORM, 0,
                         &names, err) < 0)
        return -1;
    for (i = 0; i < o->n_agents; i++) {
        if (!o->agents[i].section) {
            opts_agent_clear(&o->agents[i]);
            continue;
        }
        o->agents[i].listed = false;
        o->agents[kept++] = o->agents[i];
    }
    o->n_agents = kept;
    for (i = 0; names[i] != NULL; i++)
        opts_agent_add(o, names[i])->listed = true;
    g_strfreev(names);
    return 0;
}

static int opts_set_envname(fs_opts *o, const struct opts_def *d, const char *value, char **err)
{
    const char *p = value;

    if (!g_ascii_isalpha(*p) && *p != '_')
        return opts_fail(err, d, "an environment variable name [A-Za-z_][A-Za-z0-9_]*", value);
    for (; *p != '\0'; p++) {
        if (!g_ascii_isalnum(*p) && *p != '_')
            return opts_fail(err, d, "an environment variable name [A-Za-z_][A-Za-z0-9_]*", value);
    }
    opts_replace(&o->broker_uri_env, g_strdup(value));
    return 0;
}

static int opts_set_uri(fs_opts *o, const struct opts_def *d, const char *value, char **err)
{
    char **uris = uri_split(value);
    size_t i;
    int rc = 0;

    if (uris[0] == NULL)
        rc = opts_fail(err, d, "one or more amqp:// or amqps:// URIs", value);
    for (i = 0; rc == 0 && uris[i] != NULL; i++) {
        char *shown = uri_redact(uris[i]);

        if (uri_has_password(uris[i])) {
            *err = g_strdup_printf("%s: '%s' contains a password; give the URI "
                                   "without credentials here and put the full URI "
                                   "in the environment variable %s (named by "
                                   "broker_uri_env)",
                                   d->key, shown,
                                   o->broker_uri_env ? o->broker_uri_env : "FLEET_BROKER_URI");
            rc = -1;
        } else if (!g_str_has_prefix(uris[i], "amqp://") &&
                   !g_str_has_prefix(uris[i], "amqps://")) {
            rc = opts_fail(err, d, "amqp://HOST[:PORT][/VHOST] or amqps://...", shown);
        } else if (!opts_text_ok(uris[i])) {
            rc = opts_fail(err, d, "a URI of printable characters", shown);
        } else if (!br_uri_parses(uris[i])) {
            rc = opts_fail(err, d, "a URI that parses: amqp[s]://HOST[:PORT][/VHOST]", shown);
        }
        g_free(shown);
    }
    g_strfreev(uris);
    if (rc == 0)
        opts_replace(&o->broker_uri, g_strdup(value));
    return rc;
}

static int opts_set_choice(fs_opts *o, const struct opts_def *d, const char *value, char **err)
{
    char **choices = g_strsplit(d->choices, "|", -1);
    bool ok = value[0] != '\0' && g_strv_contains((const char *const *)choices, value);

    g_strfreev(choices);
    if (!ok)
        return opts_fail(err, d, d->choices, value);
    opts_replace(opts_field_str(o, d), g_strdup(value));
    return 0;
}

static int opts_set_text(fs_opts *o, const struct opts_def *d, const char *value, char **err)
{
    if (!opts_text_ok(value))
        return opts_fail(err, d, "1..255 printable characters", value);
    opts_replace(opts_field_str(o, d), g_strdup(value));
    return 0;
}

int opts_set_path(fs_opts *o, const struct opts_def *d, const char *value, char **err)
{
    if (!opts_text_ok(value))
        return opts_fail(err, d, "a path", value);
    if (value[0] == '~')
        return opts_fail(err, d, "an absolute path ('~' is not expanded here)", value);
    opts_replace(opts_field_str(o, d), g_canonicalize_filename(value, NULL));
    return 0;
}

static int opts_set_duration(fs_opts *o, const struct opts_def *d, const char *value, char **err)
{
    int64_t ms;

    if (parse_duration(value, &ms) < 0)
        return opts_fail(err, d,
                         "a duration > 0 such as 5s, 1500ms, 1.5s, 2m, 7d "
                         "(units ms|s|m|h|d, a bare number is seconds, at most 3650d)",
                         value);
    *(int64_t *)((char *)o + d->off) = ms;
    return 0;
}

static int opts_set_max_message(fs_opts *o, const struct opts_def *d, const char *value, char **err)
{
    uint64_t n;

    if (opts_parse_size(value, &n) < 0 || n < 1 || n > OPTS_MAX_MESSAGE)
        return opts_fail(err, d,
                         "a size 1..1020KiB in bytes, optionally with K, KiB, M or MiB (one "
                         "write must reach fleetfs as one FUSE request of at most 1 MiB, "
                         "less a page)",
                         value);
    o->max_message = (size_t)n;
    return 0;
}

static int opts_set_max_length(fs_opts *o, const struct opts_def *d, const char *value, char **err)
{
    uint64_t n;

    if (opts_parse_uint(value, 1000000000, &n) < 0 || n < 1)
        return opts_fail(err, d, "an integer 1..1000000000", value);
    o->max_length = (long)n;
    return 0;
}

static int opts_set_prefetch(fs_opts *o, const struct opts_def *d, const char *value, char **err)
{
    uint64_t n;

    if (opts_parse_uint(value, 65535, &n) < 0 || n < 1)
        return opts_fail(err, d, "an integer 1..65535", value);
    o->prefetch = (int)n;
    return 0;
}

static int opts_set_flag(fs_opts *o, const struct opts_def *d, const char *value, char **err)
{
    if (strcmp(value, "") == 0 || strcmp(value, "1") == 0 || strcmp(value, "true") == 0)
        o->insecure = true;
    else if (strcmp(value, "0") == 0 || strcmp(value, "false") == 0)
        o->insecure = false;
    else
        return opts_fail(err, d, "no value, 1, true, 0 or false", value);
    return 0;
}

/* inject_commands (issue 12): program names separated by ':', none a shell
 * (herdr/foreground.h says what counts as one, and why never). */
static int opts_set_commands(fs_opts *o, const struct opts_def *d, const char *value, char **err)
{
    char **items = g_strsplit(value, ":", -1);
    int rc = 0;

    for (size_t i = 0; rc == 0 && items[i] != NULL; i++) {
        char *q = opts_quote(items[i]);
        if (fg_is_shell(items[i]))
            *err = g_strdup_printf("%s: '%s' is a shell: a message typed into a shell runs as a "
                                   "command, so fleetfs never types into one",
                                   d->key, q);
        else if (!fg_command_ok(items[i]))
            *err = g_strdup_printf("%s: expected program names ([A-Za-z0-9._+-], as "
                                   "#{pane_current_command} shows them) separated by ':', got '%s'",
                                   d->key, q);
        rc = *err ? -1 : 0;
        g_free(q);
    }
    g_strfreev(items);
    if (rc == 0)
        opts_replace(&o->inject_commands, g_strdup(value));
    return rc;
}

/* ---- presence options ----------------------------------------------------- */

static int opts_set_heartbeat(fs_opts *o, const struct opts_def *d, const char *value, char **err)
{
    int64_t ms;

    if (parse_duration(value, &ms) < 0 || ms < 200 || ms > 3600000)
        return opts_fail(err, d, "a duration 200ms..1h such as 5s or 500ms", value);
    o->heartbeat_ms = ms;
    return 0;
}

static int opts_set_heartbeat_rate(fs_opts *o, const struct opts_def *d, const char *value,
                                   char **err)
{
    char *end = NULL;
    unsigned long n;

    errno = 0;
    n = strtoul(value, &end, 10);
    if (!*value || *end || errno || n > 100000 || value[0] == '-')
        return opts_fail(err, d, "a whole number 0..100000 (0: a fixed interval)", value);
    o->heartbeat_rate = (unsigned)n;
    return 0;
}

static int opts_set_group_rate(fs_opts *o, const struct opts_def *d, const char *value, char **err)
{
    char *end = NULL;
    unsigned long n;

    errno = 0;
    n = strtoul(value, &end, 10);
    if (!*value || *end || errno || n > 100000 || value[0] == '-')
        return opts_fail(err, d, "a whole number 0..100000 (0: every heartbeat to the groups)",
                         value);
    o->group_rate = (unsigned)n;
    return 0;
}

static int opts_set_fleet_view(fs_opts *o, const struct opts_def *d, const char *value, char **err)
{
    if (strcmp(value, "all") == 0 || strcmp(value, "groups") == 0 || strcmp(value, "auto") == 0) {
        o->fleet_view_all = strcmp(value, "all") == 0;
        o->fleet_view_auto = strcmp(value, "auto") == 0;
    } else {
        return opts_fail(err, d, "auto, all or groups", value);
    }
    return 0;
}

static int opts_set_view_limit(fs_opts *o, const struct opts_def *d, const char *value, char **err)
{
    unsigned long n;
    char *end;

    errno = 0;
    n = strtoul(value, &end, 10);
    if (!*value || *end || errno || n < 1 || n > 100000 || value[0] == '-')
        return opts_fail(err, d, "a whole number 1..100000", value);
    o->view_limit = (unsigned)n;
    return 0;
}

static int opts_set_discovery(fs_opts *o, const struct opts_def *d, const char *value, char **err)
{
    if (strcmp(value, "on") == 0 || strcmp(value, "1") == 0 || strcmp(value, "true") == 0)
        o->discovery = true;
    else if (strcmp(value, "off") == 0 || strcmp(value, "0") == 0 || strcmp(value, "false") == 0)
        o->discovery = false;
    else
        return opts_fail(err, d, "on or off", value);
    return 0;
}

/* A requester's spawn and stop requests live 1 s..5 min (the far host
 * refuses an envelope meant to live longer, wire/control.h). */
static int opts_set_spawn_ttl(fs_opts *o, const struct opts_def *d, const char *value, char **err)
{
    int64_t ms;

    if (parse_duration(value, &ms) < 0 || ms < 1000 || ms > 300000)
        return opts_fail(err, d, "a duration 1s..5m such as 60s", value);
    o->spawn_ttl_ms = ms;
    return 0;
}

/* ---- the table ---------------------------------------------------------- */

#define OFF(f) offsetof(fs_opts, f)

static const struct opts_def opts_table[] = {
    {"coord_id", opts_set_name, 0, NULL, "short host name", "this lead's name, " OPTS_NAME_FORM},
    {"peers", opts_set_peers, 0, NULL, "none", "peer lead names separated by ':'"},
    {"broker_uri_env", opts_set_envname, 0, NULL, "FLEET_BROKER_URI",
     "environment variable holding the broker URI with credentials"},
    {"broker_uri", opts_set_uri, 0, NULL, "from broker_uri_env",
     "amqp[s]://host[:port][/vhost] without password; several separated by spaces"},
    {"vhost", opts_set_text, OFF(vhost), NULL, "from the URI, else /",
     "AMQP virtual host for coordination"},
    {"queue_type", opts_set_choice, OFF(queue_type), "classic|quorum", "classic",
     "mailbox queue type, classic|quorum (same fleet-wide)"},
    {"max_length", opts_set_max_length, 0, NULL, "10000",
     "mailbox capacity in messages, 1..1000000000 (same fleet-wide)"},
    {"message_ttl", opts_set_duration, OFF(message_ttl_ms), NULL, "7d",
     "how long a message waits in a mailbox (same fleet-wide)"},
    {"expires_in", opts_set_duration, OFF(expires_in_ms), NULL, "message_ttl",
     "a message's lifetime unless its send.json says otherwise; at most message_ttl"},
    {"ask_timeout", opts_set_duration, OFF(ask_timeout_ms), NULL, "2m (at most message_ttl)",
     "how long a question written to ask waits for its answer (its lifetime) unless ask.json "
     "says; at most message_ttl"},
    {"expire_grace", opts_set_duration, OFF(expire_grace_ms), NULL, "10s",
     "after a message's expiresAt, how long sent waits for the receiver's word before it says "
     "expired by this host's clock"},
    {"agent_expires", opts_set_duration, OFF(agent_expires_ms), NULL,
     "2 x message_ttl + expire_grace (14d10s)",
     "the broker deletes an agent's mailbox after this long with no reader (x-expires); "
     "longer than message_ttl + expire_grace (same fleet-wide)"},
    {"prefetch", opts_set_prefetch, 0, NULL, "64",
     "messages held from the broker at most, 1..65535"},
    {"max_message", opts_set_max_message, 0, NULL, "64KiB", "largest message body, 1..1020KiB"},
    {"send_timeout", opts_set_duration, OFF(send_timeout_ms), NULL, "5s",
     "longest a write to send waits for the broker's confirm"},
    {"probe_timeout", opts_set_duration, OFF(probe_timeout_ms), NULL, "2s",
     "longest a status read waits for a broker probe"},
    {"takeover_grace", opts_set_duration, OFF(takeover_grace_ms), NULL, "15s",
     "at start, how long the previous consumer of the own mailbox (a daemon just unmounted) "
     "may take to go before this mount gives up"},
    {"state_dir", opts_set_path, OFF(state_dir), NULL, "$XDG_STATE_HOME/fleetfs/<coord_id>",
     "history, seen ids, injection log"},
    {"inject", opts_set_choice, OFF(inject), "auto|herdr|tmux|none", "auto",
     "how arrived messages reach the local pane; auto: herdr when its socket exists, else none"},
    {"inject_target", opts_set_text, OFF(inject_target), NULL, "coord_id",
     "agent or pane to type into"},
    {"inject_commands", opts_set_commands, 0, NULL, FG_DEFAULT_COMMANDS,
     "tmux: programs that count as an agent (':'-separated); never a shell"},
    {"inject_settle", opts_set_duration, OFF(inject_settle_ms), NULL, "500ms",
     "tmux: from a paste's end to the carriage return that submits it"},
    {"inject_quiet", opts_set_duration, OFF(inject_quiet_ms), NULL, "3s",
     "tmux: a person's keys in the pane this recent hold typing"},
    {"key", opts_set_path, OFF(key), NULL, "none",
     "this host's ed25519 secret key file (fleetfs keygen PATH)"},
    {"trusted_keys", opts_set_path, OFF(trusted_keys), NULL, "none",
     "directory of <coord_id>.pub files"},
    {"ca", opts_set_path, OFF(ca), NULL, "none (required for amqps://)",
     "CA certificate file that signed the broker's certificate (amqps://)"},
    {"config", opts_set_path, OFF(config), NULL,
     "$XDG_CONFIG_HOME/fleetfs/fleetfs.conf, /etc/fleetfs/fleetfs.conf",
     "config file ([fleetfs] group, key = value); -o wins"},
    {"insecure", opts_set_flag, 0, NULL, "off",
     "flag: neither sign nor check messages (local experiments only; status says so)"},
    /* presence */
    {"heartbeat", opts_set_heartbeat, 0, NULL, "5s",
     "heartbeat interval on fleet.roster, 200ms..1h; a lead is stale after three"},
    {"heartbeat_rate", opts_set_heartbeat_rate, 0, NULL, "200",
     "with N leads heartbeating, ours goes every max(heartbeat, N/rate s), so that each host "
     "hears at most about rate a second; 0: always every heartbeat"},
    {"group_rate", opts_set_group_rate, 0, NULL, "2",
     "fleet_view=groups: hearing G group members, our heartbeat carries our groups every "
     "max(interval, G/rate s), so each host hears about rate group heartbeats a second; the "
     "others reach only who names us; 0: every heartbeat"},
    {"discovery", opts_set_discovery, 0, NULL, "on",
     "on: peers/ also lists leads heard from; off: only the configured peers"},
    {"discovery_ttl", opts_set_duration, OFF(discovery_ttl_ms), NULL, "10m",
     "a discovered lead silent this long leaves peers/ (configured ones never do)"},
    {"fleet_view", opts_set_fleet_view, 0, NULL, "auto",
     "auto: as all while we hear at most view_limit leads, then as groups; all: hear every "
     "lead's heartbeat; groups: only our groups', our peers' and the leads we address "
     "(doc/presence.md)"},
    {"view_limit", opts_set_view_limit, 0, NULL, "100",
     "fleet_view=auto: hearing more leads than this (ourselves not counted), hear only what "
     "groups hears, 1..100000"},
    {"census_every", opts_set_duration, OFF(census_every_ms), NULL, "60s",
     "least time between two censuses (a write to census) that hear the whole fleet"},
    /* agents and groups (SPEC section 10) */
    {"agents", opts_set_agents, 0, NULL, "none",
     "local agents, names " OPTS_AGENT_FORM " separated by ':' (and [agent NAME] sections)"},
    {"groups", opts_set_groups, 0, NULL, "none",
     "groups (" OPTS_NAME_FORM ", ':'-separated, at most 16) of the lead and of every local "
     "agent without its own; 'all' is implied"},
    /* spawn (SPEC section 11; profiles are [profile NAME] config sections) */
    {"spawn_from", opts_set_spawn_from, 0, NULL, "nobody",
     "leads allowed to start and stop agents here, separated by ':'"},
    {"spawn_ttl", opts_set_spawn_ttl, 0, NULL, "60s",
     "how long a request written to hosts/<h>/spawn or stop may wait to be taken, 1s..5m"},
    {"spawn_grace", opts_set_duration, OFF(spawn_grace_ms), NULL, "330s",
     "after its spawn_ttl, how long a request may go unanswered (the far host may still be "
     "starting it) before hosts/<h>/spawns says failed"},
};

const struct opts_def *opts_find(const char *key)
{
    size_t i;

    for (i = 0; key != NULL && i < G_N_ELEMENTS(opts_table); i++) {
        if (strcmp(opts_table[i].key, key) == 0)
            return &opts_table[i];
    }
    return NULL;
}

bool opts_known(const char *key)
{
    return opts_find(key) != NULL;
}

int opts_set(fs_opts *o, const char *key, const char *value, char **err)
{
    const struct opts_def *d = opts_find(key);

    *err = NULL;
    if (d == NULL) {
        char *q = opts_quote(key ? key : "");

        *err = g_strdup_printf("unknown option '%s' (see fleetfs --help)", q);
        g_free(q);
        return -1;
    }
    return d->set(o, d, value ? value : "", err);
}

static char *opts_help_build(void)
{
    GString *s = g_string_new("fleetfs options (-o key=value, or key = value "
                              "under [fleetfs] in the config file):\n");
    size_t i;

    for (i = 0; i < G_N_ELEMENTS(opts_table); i++)
        g_string_append_printf(s, "    %-15s %s (default: %s)\n", opts_table[i].key,
                               opts_table[i].help, opts_table[i].defval);
    g_string_append(s, "Durations: number with ms|s|m|h|d (bare = seconds). "
                       "Sizes: bytes with K|KiB|M|MiB.\n"
                       "Config file sections [agent NAME] declare a local agent: keys groups "
                       "(its own, ':'-separated;\n  empty: none but all) and target (its pane; "
                       "default: the one named NAME).\n");
    return g_string_free(s, FALSE);
}

const char *opts_help(void)
{
    static gsize text; /* built once, kept for the process's life */

    if (g_once_init_enter(&text))
        g_once_init_leave(&text, (gsize)opts_help_build());
    return (const char *)text;
}

/* ---- agents and groups -------------------------------------------------- */

const char *const *opts_agent_groups(const fs_opts *o, const fs_agent *a)
{
    static const char *const none[] = {NULL};

    if (a != NULL && a->groups != NULL)
        return (const char *const *)a->groups;
    return o->groups != NULL ? (const char *const *)o->groups : none;
}

const fs_agent *opts_agent(const fs_opts *o, const char *name)
{
    return opts_agent_find((fs_opts *)o, name);
}

/* ---- URIs --------------------------------------------------------------- */

/* The user-info of uri is taken to end at the LAST '@' after the scheme, not
 * at the first '/', so a password holding '/', '@' or '?' is still caught.
 * The cost is over-redaction of a rare vhost containing '@': safe side. */
bool uri_has_password(const char *uri)
{
    return br_uri_has_password(uri);
}

char *uri_redact(const char *uri)
{
    return br_uri_redact(uri);
}

char **uri_split(const char *list)
{
    return br_uri_split(list);
}
