/* SPDX-License-Identifier: Apache-2.0 */
/* test_options.c — SPEC section 8: defaults, each option accepted and
 * refused with a message naming it, durations and sizes, the broker
 * password rule, config files, and URI redaction. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <glib.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fleetfs/wire/names.h"
#include "fleetfs/config/options.h"
#include "fleetfs/base/duration.h"
#include "fleetfs/start/startup.h"

static void set_ok(fs_opts *o, const char *key, const char *value)
{
    char *err = NULL;

    if (opts_set(o, key, value, &err) != 0)
        fail_msg("%s=%s refused: %s", key, value, err);
    assert_null(err);
}

/* Refused, with a message that names the key and contains want. */
static void set_bad(fs_opts *o, const char *key, const char *value, const char *want)
{
    char *err = NULL;

    if (opts_set(o, key, value, &err) != -1)
        fail_msg("%s=%s accepted", key, value);
    assert_non_null(err);
    if (strstr(err, key) == NULL || strstr(err, want) == NULL)
        fail_msg("message '%s' lacks '%s' or '%s'", err, key, want);
    g_free(err);
}

static void test_defaults(void **state)
{
    fs_opts o;
    char host[256];

    (void)state;
    opts_init(&o);
    if (o.coord_id != NULL) {
        assert_true(name_valid(o.coord_id));
        gethostname(host, sizeof(host));
        assert_int_equal(g_ascii_strncasecmp(host, o.coord_id, strlen(o.coord_id)), 0);
    }
    assert_non_null(o.peers);
    assert_null(o.peers[0]);
    assert_string_equal(o.broker_uri_env, "FLEET_BROKER_URI");
    assert_null(o.broker_uri);
    assert_null(o.vhost);
    assert_string_equal(o.queue_type, "classic");
    assert_int_equal(o.max_length, 10000);
    assert_int_equal(o.message_ttl_ms, 7LL * 24 * 3600 * 1000);
    assert_int_equal(o.prefetch, 64);
    assert_int_equal(o.max_message, 65536);
    assert_int_equal(o.send_timeout_ms, 5000);
    assert_int_equal(o.probe_timeout_ms, 2000);
    assert_null(o.state_dir);
    assert_string_equal(o.inject, "auto");
    assert_null(o.inject_target);
    assert_null(o.key);
    assert_null(o.trusted_keys);
    assert_null(o.ca);
    assert_null(o.config);
    assert_false(o.insecure);
    opts_free(&o);
    assert_null(o.coord_id);
    opts_free(&o); /* safe twice */
}

static void test_finish(void **state)
{
    fs_opts o;
    char *err = NULL;

    (void)state;
    opts_init(&o);
    set_ok(&o, "coord_id", "mac");
    setenv("XDG_STATE_HOME", "/tmp/xdgstate", 1);
    assert_int_equal(opts_finish(&o, &err), 0);
    assert_string_equal(o.state_dir, "/tmp/xdgstate/fleetfs/mac");
    g_free(o.state_dir);
    o.state_dir = NULL;
    unsetenv("XDG_STATE_HOME");
    setenv("HOME", "/home/tester", 1);
    assert_int_equal(opts_finish(&o, &err), 0);
    assert_string_equal(o.state_dir, "/home/tester/.local/state/fleetfs/mac");
    /* an explicit state_dir is kept */
    set_ok(&o, "state_dir", "/var/lib/fleetfs");
    assert_int_equal(opts_finish(&o, &err), 0);
    assert_string_equal(o.state_dir, "/var/lib/fleetfs");
    /* no coord_id: a clear error asking for -o coord_id= */
    g_free(o.coord_id);
    o.coord_id = NULL;
    assert_int_equal(opts_finish(&o, &err), -1);
    assert_non_null(strstr(err, "-o coord_id="));
    g_free(err);
    opts_free(&o);
}

static void test_names_and_peers(void **state)
{
    fs_opts o;

    (void)state;
    opts_init(&o);
    set_ok(&o, "coord_id", "fleet01");
    assert_string_equal(o.coord_id, "fleet01");
    set_bad(&o, "coord_id", "Fleet01", "[a-z0-9]");
    set_bad(&o, "coord_id", "", "got ''");
    set_bad(&o, "coord_id", "../etc", "lead name");
    assert_string_equal(o.coord_id, "fleet01"); /* unchanged by refusals */

    set_ok(&o, "peers", "mac:fleet02:fleet01");
    assert_int_equal(g_strv_length(o.peers), 3);
    assert_string_equal(o.peers[0], "mac");
    assert_string_equal(o.peers[2], "fleet01"); /* own id allowed */
    set_ok(&o, "peers", "solo");
    assert_int_equal(g_strv_length(o.peers), 1);
    set_ok(&o, "peers", "");
    assert_null(o.peers[0]);
    set_bad(&o, "peers", "a::b", "empty");
    set_bad(&o, "peers", ":a", "empty");
    set_bad(&o, "peers", "a:", "empty");
    set_bad(&o, "peers", "a:B", "'B' is not a lead name");
    set_bad(&o, "peers", "a:b:a", "'a' is listed twice");
    set_bad(&o, "peers", "a,b", "not a lead name");
    assert_null(o.peers[0]);
    opts_free(&o);
}

static void test_broker(void **state)
{
    fs_opts o;
    char *err = NULL;

    (void)state;
    opts_init(&o);
    set_ok(&o, "broker_uri", "amqp://rabbit.example:5672/%2fcoord");
    assert_string_equal(o.broker_uri, "amqp://rabbit.example:5672/%2fcoord");
    set_ok(&o, "broker_uri", "amqps://fleet@rabbit.example/coord");
    set_ok(&o, "broker_uri", "amqp://n1 amqp://n2,amqps://n3");
    set_bad(&o, "broker_uri", "http://rabbit", "amqp://");
    set_bad(&o, "broker_uri", "rabbit:5672", "amqp://");
    set_bad(&o, "broker_uri", "", "amqp");
    set_bad(&o, "broker_uri", "amqp://n1 ftp://n2", "amqp");

    set_ok(&o, "broker_uri_env", "MY_BROKER");
    assert_string_equal(o.broker_uri_env, "MY_BROKER");
    set_bad(&o, "broker_uri_env", "1BAD", "environment variable");
    set_bad(&o, "broker_uri_env", "A-B", "environment variable");
    set_bad(&o, "broker_uri_env", "", "environment variable");

    /* a password is refused, the message points at the env variable and
	 * never repeats the password */
    assert_int_equal(opts_set(&o, "broker_uri", "amqp://fleet:s3cret@rabbit/coord", &err), -1);
    assert_non_null(strstr(err, "broker_uri"));
    assert_non_null(strstr(err, "password"));
    assert_non_null(strstr(err, "MY_BROKER"));
    assert_null(strstr(err, "s3cret"));
    g_free(err);
    assert_int_equal(opts_set(&o, "broker_uri", "amqp://n1 amqps://u:p%40ss/w@n2", &err), -1);
    assert_null(strstr(err, "p%40ss"));
    g_free(err);
    set_bad(&o, "broker_uri", "amqp://fleet:@rabbit", "password");
    assert_string_equal(o.broker_uri, "amqp://n1 amqp://n2,amqps://n3");

    set_ok(&o, "vhost", "/coord");
    assert_string_equal(o.vhost, "/coord");
    set_bad(&o, "vhost", "", "vhost");
    set_bad(&o, "vhost", "a\nb", "printable");
    opts_free(&o);
}

static void test_choices_and_flags(void **state)
{
    fs_opts o;

    (void)state;
    opts_init(&o);
    set_ok(&o, "queue_type", "quorum");
    assert_string_equal(o.queue_type, "quorum");
    set_ok(&o, "queue_type", "classic");
    set_bad(&o, "queue_type", "stream", "classic|quorum");
    set_bad(&o, "queue_type", "", "classic|quorum");
    set_bad(&o, "queue_type", "Classic", "classic|quorum");
    set_bad(&o, "queue_type", "classic|quorum", "classic|quorum");

    set_ok(&o, "inject", "herdr");
    assert_string_equal(o.inject, "herdr");
    set_ok(&o, "inject", "tmux");
    set_ok(&o, "inject", "none");
    set_ok(&o, "inject", "auto");
    set_bad(&o, "inject", "screen", "auto|herdr|tmux|none");

    set_ok(&o, "inject_target", "lead pane");
    assert_string_equal(o.inject_target, "lead pane");
    set_bad(&o, "inject_target", "", "inject_target");
    set_bad(&o, "inject_target", "\x1b[2J", "printable");

    set_ok(&o, "insecure", "");
    assert_true(o.insecure);
    set_ok(&o, "insecure", "false");
    assert_false(o.insecure);
    set_ok(&o, "insecure", "1");
    assert_true(o.insecure);
    set_ok(&o, "insecure", "0");
    assert_false(o.insecure);
    set_ok(&o, "insecure", "true");
    assert_true(o.insecure);
    set_bad(&o, "insecure", "yes", "true");
    set_ok(&o, "insecure", NULL);
    assert_true(o.insecure);
    opts_free(&o);
}

static void test_numbers(void **state)
{
    fs_opts o;

    (void)state;
    opts_init(&o);
    set_ok(&o, "max_length", "1");
    assert_int_equal(o.max_length, 1);
    set_ok(&o, "max_length", "1000000000");
    assert_int_equal(o.max_length, 1000000000);
    set_bad(&o, "max_length", "0", "1..1000000000");
    set_bad(&o, "max_length", "1000000001", "1..1000000000");
    set_bad(&o, "max_length", "-5", "integer");
    set_bad(&o, "max_length", "1e3", "integer");
    set_bad(&o, "max_length", "99999999999999999999999", "integer");

    set_ok(&o, "prefetch", "1");
    set_ok(&o, "prefetch", "65535");
    assert_int_equal(o.prefetch, 65535);
    set_bad(&o, "prefetch", "x", "prefetch: expected an integer 1..65535, got 'x'");
    set_bad(&o, "prefetch", "0", "1..65535");
    set_bad(&o, "prefetch", "65536", "1..65535");
    set_bad(&o, "prefetch", " 5", "1..65535");
    set_bad(&o, "prefetch", "", "1..65535");
    opts_free(&o);
}

static void test_durations(void **state)
{
    static const struct {
        const char *s;
        int64_t ms;
    } good[] = {
        {"5", 5000},    {"5s", 5000},    {"1500ms", 1500},          {"1.5s", 1500},
        {"2m", 120000}, {"1h", 3600000}, {"7d", 604800000},         {"0.5", 500},
        {"1ms", 1},     {"0.001", 1},    {"3650d", 315360000000LL},
    };
    static const char *const bad[] = {
        "",    "0",   "0s",   "0.0001s", "-1s", "s",      "5x", "5 s",   " 5",   "1e3",
        "inf", "nan", "0x10", "1.",      ".5",  "1.5.5s", "5S", "3651d", "5sec",
    };
    fs_opts o;
    int64_t ms;
    size_t i;

    (void)state;
    for (i = 0; i < G_N_ELEMENTS(good); i++) {
        assert_int_equal(parse_duration(good[i].s, &ms), 0);
        assert_int_equal(ms, good[i].ms);
    }
    for (i = 0; i < G_N_ELEMENTS(bad); i++) {
        if (parse_duration(bad[i], &ms) == 0)
            fail_msg("duration '%s' accepted", bad[i]);
    }
    opts_init(&o);
    set_ok(&o, "message_ttl", "1d");
    assert_int_equal(o.message_ttl_ms, 86400000);
    set_ok(&o, "send_timeout", "1.5s");
    assert_int_equal(o.send_timeout_ms, 1500);
    set_ok(&o, "probe_timeout", "250ms");
    assert_int_equal(o.probe_timeout_ms, 250);
    set_bad(&o, "message_ttl", "forever", "duration");
    set_bad(&o, "send_timeout", "0", "ms|s|m|h|d");
    set_bad(&o, "probe_timeout", "-2s", "duration");
    assert_int_equal(o.probe_timeout_ms, 250);
    opts_free(&o);
}

/* presence (doc/presence.md) */
static void test_presence(void **state)
{
    fs_opts o;
    (void)state;
    opts_init(&o);
    assert_int_equal(o.heartbeat_ms, 5000);
    assert_true(o.discovery);
    assert_int_equal(o.discovery_ttl_ms, 600000);
    set_ok(&o, "heartbeat", "1s");
    assert_int_equal(o.heartbeat_ms, 1000);
    set_ok(&o, "heartbeat", "200ms");
    assert_int_equal(o.heartbeat_ms, 200);
    set_bad(&o, "heartbeat", "100ms", "200ms..1h");
    set_bad(&o, "heartbeat", "2h", "200ms..1h");
    set_bad(&o, "heartbeat", "often", "200ms..1h");
    set_ok(&o, "discovery", "off");
    assert_false(o.discovery);
    set_ok(&o, "discovery", "on");
    assert_true(o.discovery);
    set_bad(&o, "discovery", "maybe", "on or off");
    set_ok(&o, "discovery_ttl", "30s");
    assert_int_equal(o.discovery_ttl_ms, 30000);
    set_bad(&o, "discovery_ttl", "0", "ms|s|m|h|d");
    opts_free(&o);
}

static void test_sizes(void **state)
{
    fs_opts o;
    uint64_t b;

    (void)state;
    assert_int_equal(opts_parse_size("100", &b), 0);
    assert_int_equal(b, 100);
    assert_int_equal(opts_parse_size("64K", &b), 0);
    assert_int_equal(b, 65536);
    assert_int_equal(opts_parse_size("64KiB", &b), 0);
    assert_int_equal(b, 65536);
    assert_int_equal(opts_parse_size("2M", &b), 0);
    assert_int_equal(b, 2097152);
    assert_int_equal(opts_parse_size("2MiB", &b), 0);
    assert_int_equal(opts_parse_size("2G", &b), -1);
    assert_int_equal(opts_parse_size("K", &b), -1);
    assert_int_equal(opts_parse_size("1.5K", &b), -1);
    assert_int_equal(opts_parse_size("-1", &b), -1);

    opts_init(&o);
    set_ok(&o, "max_message", "1");
    assert_int_equal(o.max_message, 1);
    set_ok(&o, "max_message", "1020KiB");
    assert_int_equal(o.max_message, 1024 * 1024 - 4096);
    set_ok(&o, "max_message", "128K");
    assert_int_equal(o.max_message, 131072);
    set_bad(&o, "max_message", "0", "1..1020KiB");
    set_bad(&o, "max_message", "2M", "1..1020KiB");
    /* one FUSE request (1 MiB) or more: a cut write could slip through */
    set_bad(&o, "max_message", "1MiB", "1..1020KiB");
    set_bad(&o, "max_message", "1044481", "1..1020KiB");
    set_bad(&o, "max_message", "64kb", "KiB");
    set_bad(&o, "max_message", "99999999999999999999K", "KiB");
    assert_int_equal(o.max_message, 131072);
    opts_free(&o);
}

static void test_paths(void **state)
{
    fs_opts o;
    char *cwd = g_get_current_dir();
    char *want = g_build_filename(cwd, "keys", "host.key", NULL);

    (void)state;
    opts_init(&o);
    set_ok(&o, "state_dir", "/var/lib/fleetfs/");
    assert_string_equal(o.state_dir, "/var/lib/fleetfs");
    set_ok(&o, "key", "keys/host.key");
    assert_string_equal(o.key, want);
    set_ok(&o, "trusted_keys", "/etc/fleetfs/trusted");
    assert_string_equal(o.trusted_keys, "/etc/fleetfs/trusted");
    set_ok(&o, "ca", "/etc/ssl/ca.pem");
    assert_string_equal(o.ca, "/etc/ssl/ca.pem");
    set_ok(&o, "config", "/etc/fleetfs/other.conf");
    assert_string_equal(o.config, "/etc/fleetfs/other.conf");
    set_bad(&o, "key", "~/host.key", "'~' is not expanded");
    set_bad(&o, "state_dir", "", "path");
    set_bad(&o, "ca", "a\tb", "path");
    opts_free(&o);
    g_free(want);
    g_free(cwd);
}

static void test_unknown_and_known(void **state)
{
    fs_opts o;
    char *err = NULL;
    static const char *const keys[] = {
        "coord_id",     "peers",       "broker_uri_env", "broker_uri",
        "vhost",        "queue_type",  "max_length",     "message_ttl",
        "prefetch",     "max_message", "send_timeout",   "probe_timeout",
        "state_dir",    "inject",      "inject_target",  "key",
        "trusted_keys", "ca",          "config",         "insecure",
        "heartbeat",    "discovery",   "discovery_ttl",
    };
    const char *help = opts_help();
    size_t i;

    (void)state;
    opts_init(&o);
    assert_int_equal(opts_set(&o, "colour", "blue", &err), -1);
    assert_string_equal(err, "unknown option 'colour' (see fleetfs --help)");
    g_free(err);
    assert_int_equal(opts_set(&o, "password", "x", &err), -1);
    g_free(err);
    assert_false(opts_known("colour"));
    assert_false(opts_known(""));
    assert_false(opts_known(NULL));
    assert_false(opts_known("Coord_id"));
    for (i = 0; i < G_N_ELEMENTS(keys); i++) {
        char *line = g_strdup_printf("    %s ", keys[i]);

        assert_true(opts_known(keys[i]));
        if (strstr(help, line) == NULL)
            fail_msg("--help lacks %s", keys[i]);
        g_free(line);
    }
    assert_non_null(strstr(help, "(default: 10000)"));
    assert_non_null(strstr(help, "(default: FLEET_BROKER_URI)"));
    opts_free(&o);
}

static char *write_conf(const char *text)
{
    GError *ge = NULL;
    char *path = NULL;
    int fd = g_file_open_tmp("fleetfs-test-XXXXXX.conf", &path, &ge);

    assert_true(fd >= 0);
    close(fd);
    assert_true(g_file_set_contents(path, text, -1, &ge));
    return path;
}

/* The config text is refused, by opts_load_file (naming the file) or, with
 * at_finish, by opts_finish, with a message that contains want. */
static void conf_refused(const char *text, const char *want, bool at_finish)
{
    fs_opts o;
    char *err = NULL;
    char *path = write_conf(text);

    opts_init(&o);
    assert_int_equal(opts_load_file(&o, path, true, &err), at_finish ? 0 : -1);
    if (at_finish)
        assert_int_equal(opts_finish(&o, &err), -1);
    assert_non_null(err);
    if ((!at_finish && strstr(err, path) == NULL) || strstr(err, want) == NULL)
        fail_msg("message '%s' lacks the path or '%s'", err, want);
    g_free(err);
    opts_free(&o);
    unlink(path);
    g_free(path);
}

static void load_bad(const char *text, const char *want)
{
    conf_refused(text, want, false);
}

static void test_config_file(void **state)
{
    fs_opts o;
    char *err = NULL;
    char *path = write_conf("# fleet settings\n[fleetfs]\ncoord_id = mac\n"
                            "peers = fleet01:fleet02\nqueue_type=quorum\n"
                            "send_timeout = 2.5s\nmax_message = 32KiB\ninsecure = true\n");

    (void)state;
    opts_init(&o);
    assert_int_equal(opts_load_file(&o, path, true, &err), 0);
    assert_null(err);
    assert_string_equal(o.coord_id, "mac");
    assert_int_equal(g_strv_length(o.peers), 2);
    assert_string_equal(o.queue_type, "quorum");
    assert_int_equal(o.send_timeout_ms, 2500);
    assert_int_equal(o.max_message, 32768);
    assert_true(o.insecure);
    /* -o after the file wins */
    set_ok(&o, "queue_type", "classic");
    assert_string_equal(o.queue_type, "classic");
    opts_free(&o);
    unlink(path);
    g_free(path);

    load_bad("[fleetfs]\ncoord_id = mac\ncolour = blue\n", "unknown option 'colour'");
    load_bad("[fleetfs]\ncoord_id = mac\n[extra]\nx = 1\n", "unknown group [extra]");
    load_bad("[global]\ncoord_id = mac\n", "unknown group [global]");
    load_bad("[fleetfs]\nprefetch = lots\n", "prefetch: expected an integer 1..65535");
    load_bad("[fleetfs]\nbroker_uri = amqp://u:hunter2@h/\n", "password");
    load_bad("[fleetfs]\nconfig = /etc/other.conf\n", "config");
    load_bad("coord_id = mac\n", "");
    load_bad("[fleetfs\n", "");

    /* missing file: fine unless it must exist */
    opts_init(&o);
    assert_int_equal(opts_load_file(&o, "/nonexistent/fleetfs.conf", false, &err), 0);
    assert_null(err);
    assert_int_equal(opts_load_file(&o, "/nonexistent/fleetfs.conf", true, &err), -1);
    assert_non_null(strstr(err, "/nonexistent/fleetfs.conf"));
    g_free(err);
    opts_free(&o);
}

/* A relative path in a config file names the file's neighbour, whatever
 * the directory fleetfs was started in (/ under systemd). */
static void test_config_relative_paths(void **state)
{
    fs_opts o;
    char *err = NULL;
    char *path = write_conf("[fleetfs]\nkey = keys/mac.key\ntrusted_keys = ../trust\n"
                            "ca = /abs/ca.pem\n");
    char *dir = g_path_get_dirname(path);
    char *want_key = g_build_filename(dir, "keys", "mac.key", NULL);
    char *parent = g_path_get_dirname(dir);
    char *want_trust = g_build_filename(parent, "trust", NULL);

    (void)state;
    opts_init(&o);
    assert_int_equal(opts_load_file(&o, path, true, &err), 0);
    assert_string_equal(o.key, want_key);
    assert_string_equal(o.trusted_keys, want_trust);
    assert_string_equal(o.ca, "/abs/ca.pem");
    opts_free(&o);
    unlink(path);
    g_free(path);
    g_free(dir);
    g_free(parent);
    g_free(want_key);
    g_free(want_trust);
}

/* ---- agents and groups (SPEC section 10) --------------------------------- */

static const fs_agent *agent_named(const fs_opts *o, const char *name)
{
    for (size_t i = 0; i < o->n_agents; i++)
        if (strcmp(o->agents[i].name, name) == 0)
            return &o->agents[i];
    return NULL;
}

static char *joined(const char *const *v)
{
    return v ? g_strjoinv(":", (char **)v) : g_strdup("(null)");
}

static void groups_are(const fs_opts *o, const fs_agent *a, const char *want)
{
    char *got = joined(opts_agent_groups(o, a));

    if (strcmp(got, want) != 0)
        fail_msg("groups of %s: '%s', want '%s'", a ? a->name : "the lead", got, want);
    g_free(got);
}

static void test_agents_and_groups(void **state)
{
    fs_opts o;

    (void)state;
    opts_init(&o);
    assert_int_equal(o.n_agents, 0);
    assert_non_null(o.groups);
    assert_null(o.groups[0]);
    groups_are(&o, NULL, "");

    set_ok(&o, "agents", "w1:build-bot_2");
    assert_int_equal(o.n_agents, 2);
    assert_string_equal(o.agents[0].name, "w1");
    assert_string_equal(o.agents[1].name, "build-bot_2");
    assert_null(o.agents[0].groups); /* the default groups */
    assert_null(o.agents[0].target); /* its pane is named like it */
    set_bad(&o, "agents", "W1", "'W1' is not an agent name (expected [a-z][a-z0-9_-]{0,31})");
    set_bad(&o, "agents", "1w", "not an agent name");
    set_bad(&o, "agents", "w1@mac", "not an agent name");
    set_bad(&o, "agents", "abcdefghijklmnopqrstuvwxyz0123456", "not an agent name");
    set_bad(&o, "agents", "w1::w2", "empty");
    set_bad(&o, "agents", "w1,w2", "not an agent name");
    set_bad(&o, "agents", "w1:w2:w1", "'w1' is listed twice");
    assert_int_equal(o.n_agents, 2); /* unchanged by refusals */
    set_ok(&o, "agents", "w3");      /* a later agents= replaces the list */
    assert_int_equal(o.n_agents, 1);
    assert_string_equal(o.agents[0].name, "w3");
    set_ok(&o, "agents", "");
    assert_int_equal(o.n_agents, 0);

    set_ok(&o, "groups", "build:ops");
    groups_are(&o, NULL, "build:ops");
    set_bad(&o, "groups", "Build", "'Build' is not a group name");
    set_bad(&o, "groups", "a.b", "not a group name");
    set_bad(&o, "groups", "w1@mac", "not a group name");
    set_bad(&o, "groups", "a::b", "empty");
    set_bad(&o, "groups", "a:b:a", "'a' is listed twice");
    set_bad(&o, "groups", "all", "'all' is every entity's group already");
    set_bad(&o, "groups", "g1:g2:g3:g4:g5:g6:g7:g8:g9:g10:g11:g12:g13:g14:g15:g16:g17",
            "at most 16");
    groups_are(&o, NULL, "build:ops");
    set_ok(&o, "agents", "w1");
    groups_are(&o, agent_named(&o, "w1"), "build:ops"); /* no groups of its own */
    opts_free(&o);
}

static void test_agent_sections(void **state)
{
    fs_opts o;
    char *err = NULL;
    const fs_agent *a;
    char *path = write_conf("[fleetfs]\ncoord_id = mac\nagents = w1:w2\ngroups = build\n"
                            "[agent w2]\ngroups = test:ops\ntarget = pane-7\n"
                            "[agent w3]\n"
                            "[agent w4]\ngroups =\n");

    (void)state;
    opts_init(&o);
    assert_int_equal(opts_load_file(&o, path, true, &err), 0);
    assert_null(err);
    /* agents= and sections both count; each agent once */
    assert_int_equal(o.n_agents, 4);
    a = agent_named(&o, "w1");
    assert_non_null(a);
    assert_null(a->groups);
    groups_are(&o, a, "build");
    a = agent_named(&o, "w2");
    assert_non_null(a);
    groups_are(&o, a, "test:ops");
    assert_string_equal(a->target, "pane-7");
    a = agent_named(&o, "w3"); /* only a section: an agent all the same */
    assert_non_null(a);
    groups_are(&o, a, "build");
    assert_null(a->target);
    a = agent_named(&o, "w4"); /* groups = (empty): none of its own, not the default */
    assert_non_null(a);
    groups_are(&o, a, "");
    /* -o agents= replaces the file's agents=, never its sections */
    set_ok(&o, "agents", "w9");
    assert_int_equal(o.n_agents, 4);
    assert_null(agent_named(&o, "w1"));
    assert_non_null(agent_named(&o, "w2"));
    assert_non_null(agent_named(&o, "w9"));
    assert_int_equal(opts_finish(&o, &err), 0);
    opts_free(&o);
    unlink(path);
    g_free(path);

    load_bad("[agent W1]\n", "[agent W1]: 'W1' is not an agent name");
    load_bad("[agent w1@mac]\n", "not an agent name");
    load_bad("[agent ]\n", "not an agent name");
    load_bad("[agent]\ngroups = a\n", "unknown group [agent]");
    load_bad("[agent w1]\ncolour = blue\n",
             "[agent w1]: unknown key 'colour' (an [agent NAME] section takes groups and target)");
    load_bad("[agent w1]\ngroups = Bad\n", "[agent w1]: groups: 'Bad' is not a group name");
    load_bad("[agent w1]\ntarget =\n", "[agent w1]: target");
    load_bad("[fleetfs]\nagents = w1:W2\n", "agents: 'W2' is not an agent name");
    load_bad("[fleetfs]\ncoord_id = mac\n[extra]\nx = 1\n", "unknown group [extra]");
}

static void finish_bad(const char *conf, const char *want)
{
    conf_refused(conf, want, true);
}

/* Two entities typed into one pane would each read the other's mail. */
static void test_agent_targets_distinct(void **state)
{
    (void)state;
    finish_bad("[fleetfs]\ncoord_id = mac\nagents = mac\n",
               "agent 'mac' and the lead would type into the same pane 'mac'");
    finish_bad("[fleetfs]\ncoord_id = mac\ninject_target = boss\n[agent w1]\ntarget = boss\n",
               "agent 'w1' and the lead would type into the same pane 'boss'");
    finish_bad("[fleetfs]\ncoord_id = mac\n[agent w1]\ntarget = p\n[agent w2]\ntarget = p\n",
               "agents 'w1' and 'w2' would type into the same pane 'p'");
    finish_bad("[fleetfs]\ncoord_id = mac\nagents = w1\n[agent w2]\ntarget = w1\n",
               "agents 'w1' and 'w2' would type into the same pane 'w1'");
}

static void redacts(const char *in, const char *want)
{
    char *out = uri_redact(in);

    assert_string_equal(out, want);
    g_free(out);
}

static void test_uri_redact(void **state)
{
    (void)state;
    redacts("amqp://user:secret@h:5672/v", "amqp://user:***@h:5672/v");
    redacts("amqps://user:secret@h/%2fcoord", "amqps://user:***@h/%2fcoord");
    redacts("amqp://h:5672/v", "amqp://h:5672/v");
    redacts("amqp://user@h/v", "amqp://user@h/v");
    redacts("amqp://", "amqp://");
    redacts("", "");
    /* a URI that does not parse (a raw '@', '/' or ':' in the password,
     * a bad %-escape, another scheme): scheme://host:port at most */
    redacts("amqp://u:p@ss@h/v", "amqp://h (unparsable)");
    redacts("amqp://u:pa/ss@h:5672/v", "amqp://h:5672 (unparsable)");
    redacts("amqp://u:a:b@h:1", "amqp://h:1 (unparsable)");
    redacts("amqp://u:Xy%zz@127.0.0.1:5672/v", "amqp://127.0.0.1:5672 (unparsable)");
    redacts("htp://u:secret@h:1", "htp://h:1 (unparsable)");
    redacts("amqp://u:Xy", "amqp://(unparsable)"); /* a list cut inside a password */
    /* what parses may hold ',', ';' and spaces in the password */
    redacts("amqp://u:Xy,9q@127.0.0.1:5672/v", "amqp://u:***@127.0.0.1:5672/v");
    redacts("amqp://u:a b;c@h", "amqp://u:***@h");
    redacts("amqp://u:a%40b%3A%25c%20d@h:1/%2f", "amqp://u:***@h:1/%2f");
    redacts("amqp://u:@h", "amqp://u:***@h");
    redacts("u:secret@h", "(not a URI)"); /* no scheme */
    redacts("amqp://:secret@h", "amqp://:***@h");
    assert_null(uri_redact(NULL));
    {
        char *out = uri_redact("amqp://u:top?secret#x@h/v?q=1");

        assert_null(strstr(out, "secret"));
        g_free(out);
    }
    assert_true(uri_has_password("amqp://u:p@h"));
    assert_true(uri_has_password("amqp://u:p@ss@h"));
    assert_true(uri_has_password("amqp://u:a,b@h"));
    assert_false(uri_has_password("amqp://u@h:5672"));
    assert_false(uri_has_password("amqp://h:5672/v"));
    assert_false(uri_has_password(NULL));
}

static void test_uri_split(void **state)
{
    char **v;

    (void)state;
    v = uri_split("amqp://a, amqp://b\tamqps://c\n,,amqp://d");
    assert_int_equal(g_strv_length(v), 4);
    assert_string_equal(v[0], "amqp://a");
    assert_string_equal(v[1], "amqp://b");
    assert_string_equal(v[2], "amqps://c");
    assert_string_equal(v[3], "amqp://d");
    g_strfreev(v);
    /* a separator counts only before the next amqp:// or amqps://, so a
     * password may hold ',', ';' and spaces */
    v = uri_split("amqp://u:Xy,9q@h:1/v, amqps://u:a b;c@h2 amqp://h3,");
    assert_int_equal(g_strv_length(v), 3);
    assert_string_equal(v[0], "amqp://u:Xy,9q@h:1/v");
    assert_string_equal(v[1], "amqps://u:a b;c@h2");
    assert_string_equal(v[2], "amqp://h3");
    g_strfreev(v);
    v = uri_split("  , ");
    assert_null(v[0]);
    g_strfreev(v);
    v = uri_split(NULL);
    assert_null(v[0]);
    g_strfreev(v);
    v = uri_split("amqp://only");
    assert_int_equal(g_strv_length(v), 1);
    g_strfreev(v);
}

/* One FUSE write request of the kernel that runs: max_message must stay a
 * page below it (startup.c). */
static void test_write_request_bytes(void **state)
{
    (void)state;
    assert_int_equal(su_write_request_bytes("6.18.44-fc", -1, 4096), 1024 * 1024);
    assert_int_equal(su_write_request_bytes("4.20.0", -1, 4096), 1024 * 1024);
    assert_int_equal(su_write_request_bytes("5.10.0-28-amd64", 0, 4096), 1024 * 1024);
    /* before FUSE_MAX_PAGES: 32 pages */
    assert_int_equal(su_write_request_bytes("4.19.0-25-amd64", -1, 4096), 128 * 1024);
    assert_int_equal(su_write_request_bytes("3.10.0-1160.el7", -1, 4096), 128 * 1024);
    /* not a release: the smaller limit */
    assert_int_equal(su_write_request_bytes("?", -1, 4096), 128 * 1024);
    /* fs.fuse.max_pages_limit lowers it, never raises it */
    assert_int_equal(su_write_request_bytes("6.13.0", 64, 4096), 256 * 1024);
    assert_int_equal(su_write_request_bytes("6.13.0", 1024, 4096), 1024 * 1024);
    /* 64 KiB pages: max_write (1 MiB) is the limit */
    assert_int_equal(su_write_request_bytes("6.1.0", -1, 65536), 1024 * 1024);
    assert_int_equal(su_write_request_bytes("4.14.0", -1, 65536), 1024 * 1024);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_finish),
        cmocka_unit_test(test_names_and_peers),
        cmocka_unit_test(test_broker),
        cmocka_unit_test(test_choices_and_flags),
        cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_durations),
        cmocka_unit_test(test_presence),
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_paths),
        cmocka_unit_test(test_unknown_and_known),
        cmocka_unit_test(test_config_file),
        cmocka_unit_test(test_config_relative_paths),
        cmocka_unit_test(test_agents_and_groups),
        cmocka_unit_test(test_agent_sections),
        cmocka_unit_test(test_agent_targets_distinct),
        cmocka_unit_test(test_uri_redact),
        cmocka_unit_test(test_uri_split),
        cmocka_unit_test(test_write_request_bytes),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
