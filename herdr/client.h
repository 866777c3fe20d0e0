/* SPDX-License-Identifier: Apache-2.0 */
/* client.h — a small client for herdr's JSON socket API (protocol 20).
 *
 * Every call is one connection: connect, write one compact JSON line, read
 * one reply line under a client-side deadline, close. The outcome of a call
 * is always an hd_reply whose kind says what happened; the typed calls also
 * parse the result into small fixed-size structs. No call keeps state on the
 * server, so calls from several threads may share one hd_client.
 *
 * Text typed into a pane must already be clean (see herdr/sanitize.h):
 * hd_agent_prompt and hd_pane_send_input refuse, before connecting, text
 * that san_text() would change. */
#ifndef FLEETFS_HERDR_CLIENT_H
#define FLEETFS_HERDR_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>

/* What became of a call. For every kind but HD_OK, code and message say
 * more: HD_ERR_REMOTE carries herdr's own error code ("agent_blocked"...);
 * the local kinds carry a short local reason in code ("connect", "timeout",
 * "closed", "truncated", "too_large", "bad_json", "id_mismatch",
 * "bad_result", "bad_request", "unsafe_text"). */
enum {
    HD_OK = 0,
    HD_ERR_REMOTE,   /* herdr answered with an error envelope */
    HD_ERR_DOWN,     /* no socket, nobody listening, or cannot connect */
    HD_ERR_TIMEOUT,  /* no complete reply before the client's deadline */
    HD_ERR_CLOSED,   /* herdr closed the connection without a full line */
    HD_ERR_PROTOCOL, /* a reply we cannot use, or a request we won't send */
};

typedef struct {
    int kind;
    char code[48];
    char message[256];
    json_t *result; /* HD_OK only: the "result" object, owned */
} hd_reply;

void hd_reply_clear(hd_reply *r);
const char *hd_kind_name(int kind);

typedef enum {
    HD_UNKNOWN = 0,
    HD_IDLE,
    HD_DONE,
    HD_WORKING,
    HD_BLOCKED,
} hd_status;

hd_status hd_status_parse(const char *s); /* NULL or unknown → HD_UNKNOWN */
const char *hd_status_name(hd_status s);

/* Identifiers (pane_id, workspace_id, tab_id, name) longer than their buffer
 * make the entry unparsable rather than truncated: a truncated id would name
 * a different pane. Display fields are truncated at a UTF-8 boundary.
 * Missing optional fields are empty strings. */
#define HD_ID_MAX 64
#define HD_TEXT_MAX 256

typedef struct {
    char pane_id[HD_ID_MAX];
    char workspace_id[HD_ID_MAX];
    char tab_id[HD_ID_MAX];
    char name[HD_ID_MAX]; /* agent name, when herdr reports one */
    char label[HD_TEXT_MAX];
    char title[HD_TEXT_MAX];
    char agent[HD_ID_MAX]; /* "claude", "codex", ... or "" */
    bool focused;
    hd_status status;
} hd_pane;

typedef struct {
    char pane_id[HD_ID_MAX];
    char name[HD_ID_MAX];
    char agent[HD_ID_MAX];
    hd_status status;
    bool launch_pending; /* herdr 0.8.2+: its managed start is not ready yet (absent: false) */
} hd_agent;

typedef struct {
    char version[HD_ID_MAX]; /* as sent, suffix included; "" if absent */
    long protocol;           /* -1 if absent */
    char text[128];          /* "herdr 0.8.2 protocol 20" for logs */
} hd_version;

/* The herdr socket path by the protocol's resolution order; malloc'd, NULL
 * when no candidate can be formed (no HOME, or a session name with '/'). */
char *hd_socket_path(void);

typedef struct hd_client hd_client;

/* socket_path NULL → hd_socket_path(). NULL when out of memory or no path. */
hd_client *hd_client_new(const char *socket_path);
void hd_client_free(hd_client *c);
const char *hd_client_path(const hd_client *c);

/* Parses one reply line (a trailing '\n' is allowed) into *out, which must
 * be cleared or zeroed. expect_id NULL accepts any id. An error envelope is
 * accepted with our id, an empty id or no id (herdr answers malformed
 * requests with id ""); a success must carry our id. Returns out->kind. */
int hd_parse_reply(const char *line, size_t len, const char *expect_id, hd_reply *out);

/* One raw call. params is borrowed (NULL → {}). timeout_ms bounds the whole
 * call: connect, write and read. Returns out->kind. */
int hd_call(hd_client *c, const char *method, json_t *params, int timeout_ms, hd_reply *out);

/* Parsers for result objects, exposed for tests. 0 on success, -1 when a
 * required field is missing, mistyped or too long. */
int hd_parse_pane(const json_t *obj, hd_pane *out);
int hd_parse_agent(const json_t *obj, hd_agent *out);
int hd_parse_version(const json_t *result, hd_version *out);

/* Typed calls. Each returns rep->kind; the struct out-parameters are filled
 * only on HD_OK. A success whose result has the wrong shape becomes
 * HD_ERR_PROTOCOL "bad_result". rep must be cleared or zeroed. */
int hd_ping(hd_client *c, int timeout_ms, hd_version *v, hd_reply *rep);
int hd_agent_get(hd_client *c, const char *target, int timeout_ms, hd_agent *a, hd_reply *rep);
int hd_agent_list(hd_client *c, int timeout_ms, hd_agent **agents, size_t *n, hd_reply *rep);
int hd_pane_get(hd_client *c, const char *pane_id, int timeout_ms, hd_pane *p, hd_reply *rep);
int hd_pane_list(hd_client *c, int timeout_ms, hd_pane **panes, size_t *n, hd_reply *rep);

/* agent.prompt. wait_until is a NULL-terminated list of status names; NULL
 * sends no wait, an empty list waits for herdr's default (idle, done,
 * blocked). With a wait the client's deadline is wait_timeout_ms +
 * timeout_ms, so herdr always answers first. a (may be NULL) receives the
 * AgentInfo of the reply; HD_OK means herdr took the text, even when that
 * AgentInfo is unusable (then *a is zeroed: pane_id "", HD_UNKNOWN). */
int hd_agent_prompt(hd_client *c, const char *target, const char *text,
                    const char *const *wait_until, int wait_timeout_ms, int timeout_ms, hd_agent *a,
                    hd_reply *rep);

/* pane.send_input. text may be NULL; keys is NULL-terminated or NULL. */
int hd_pane_send_input(hd_client *c, const char *pane_id, const char *text, const char *const *keys,
                       int timeout_ms, hd_reply *rep);

/* Making panes and starting agents (SPEC section 11, HERDR-PROTOCOL.md
 * "Making a pane and starting an agent in it"). Ids are taken from the
 * reply, never predicted; every call is unfocused (focus:false), so a
 * spawn never pulls the user's view away.
 *
 * tab.create: a new tab (workspace_id, label: NULL for herdr's choice);
 * its root pane into *root. */
int hd_tab_create(hd_client *c, const char *workspace_id, const char *label, int timeout_ms,
                  hd_pane *root, hd_reply *rep);
/* pane.split: a new pane beside target_pane_id (NULL: herdr's choice),
 * direction "right" or "down", starting in cwd (NULL: herdr's default).
 * No env is ever sent. The new pane into *out. */
int hd_pane_split(hd_client *c, const char *target_pane_id, const char *direction, const char *cwd,
                  int timeout_ms, hd_pane *out, hd_reply *rep);
/* agent.start: start an agent of kind in pane_id (at its shell prompt),
 * named name, with args (NULL-terminated, NULL for none) passed to it
 * unchanged. herdr answers once it sees the agent ready, so wait_ms is
 * sent as timeout_ms and must be > 3000 and <= 300000 (refused here,
 * before connecting, otherwise); the client's deadline is wait_ms +
 * timeout_ms, so herdr always answers first. a (may be NULL) receives
 * the AgentInfo. */
int hd_agent_start(hd_client *c, const char *name, const char *kind, const char *pane_id,
                   const char *const *args, int wait_ms, int timeout_ms, hd_agent *a,
                   hd_reply *rep);
/* pane.close: the pane and what runs in it. */
int hd_pane_close(hd_client *c, const char *pane_id, int timeout_ms, hd_reply *rep);

#endif
