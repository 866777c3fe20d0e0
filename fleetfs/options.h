/* options.h — fleetfs configuration (SPEC section 8): the option set, its
 * defaults, validation of every value from -o or a config file, the --help
 * text, and broker URI helpers. An fs_opts is owned by main until the mount
 * starts and is read-only afterwards. Strings are g_malloc'd (g_free). */
#ifndef FLEETFS_OPTIONS_H
#define FLEETFS_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    char *coord_id;
    char **peers; /* NULL-terminated, g_strfreev-able; empty = {NULL} */
    char *broker_uri_env;
    char *broker_uri;
    char *vhost;      /* NULL = from URI, else "/" */
    char *queue_type; /* "classic" | "quorum" */
    long max_length;
    int64_t message_ttl_ms;
    int prefetch;
    size_t max_message;
    int64_t send_timeout_ms;
    int64_t probe_timeout_ms;
    int64_t takeover_grace_ms; /* wait this long for a previous consumer of the inbox to go */
    char *state_dir;
    char *inject; /* herdr | tmux | none */
    char *inject_target;
    char *inject_commands; /* ':'-separated programs the tmux backend types into */
    char *key;
    char *trusted_keys;
    char *ca;
    char *config;
    bool insecure;
    /* presence (doc/presence.md) */
    int64_t heartbeat_ms;     /* between heartbeats; stale after three */
    bool discovery;           /* peers/ also lists leads heard from */
    int64_t discovery_ttl_ms; /* a silent discovered lead leaves peers/ */
} fs_opts;

void opts_init(fs_opts *o);
bool opts_known(const char *key);
/* 0 ok; -1 and *err (g_free) naming the key and the accepted form. */
int opts_set(fs_opts *o, const char *key, const char *value, char **err);
/* GKeyFile with one group [fleetfs]; every key goes through opts_set. */
int opts_load_file(fs_opts *o, const char *path, bool must_exist, char **err);
/* Derives state_dir when unset and checks coord_id is known. */
int opts_finish(fs_opts *o, char **err);
void opts_free(fs_opts *o);
/* Every option, its default, one line each. Static storage. */
const char *opts_help(void);

/* amqp://user:secret@h:p/v -> amqp://user:***@h:p/v; g_free. NULL -> NULL. */
char *uri_redact(const char *uri);
/* URIs separated by whitespace or commas -> NULL-terminated strv. */
char **uri_split(const char *list);

/* Extras. */
/* The URI carries a password (a ':' in its user-info). */
bool uri_has_password(const char *uri);
/* "1.5s", "500ms", "2m", "7d"; bare number = seconds. 0 ok, -1 bad or <1ms. */
int opts_parse_duration(const char *s, int64_t *ms);
/* "65536", "64K", "64KiB", "1M", "1MiB". 0 ok, -1 bad. */
int opts_parse_size(const char *s, uint64_t *bytes);

#endif
