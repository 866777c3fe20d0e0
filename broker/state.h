/* SPDX-License-Identifier: Apache-2.0 */
/* broker/state.h — the broker thread's shared state (state.c): clocks,
 * requests and their completion, the timers of asynchronous publishes,
 * and the status other threads read.  For broker/ only. */
#ifndef FLEETFS_BROKER_STATE_H
#define FLEETFS_BROKER_STATE_H

#include "broker/conn_int.h"

int64_t br_now_ms(void); /* monotonic */
/* The broker sent something (or answered): the link and the thread live. */
void br_heard(br_conn *c);
/* The connection's socket, for the watchdog: set when connected, -1 before
 * it is destroyed.  Returns the reason the socket was shut down from
 * outside (and forgets it), or NULL. */
void br_set_sock(br_conn *c, int fd, char *kicked, size_t n);
int64_t br_wall_ms(void); /* ms since the Unix epoch, for status times */
/* Finish r with result (and detail, unless r has one already) and drop the
 * broker thread's reference; an abandoned request reaches late_confirm or
 * late_ack instead of its caller. */
void br_req_complete(br_conn *c, br_req *r, fe_code result, const char *detail);
/* A request with two references (the caller's and the broker thread's);
 * submit hands it to the thread; wait waits for it until the deadline
 * (*gave_up: it is left to the thread, abandoned). */
br_req *br_req_new(rq_kind kind);
void br_req_unref(br_req *r);
void br_req_submit(br_conn *c, br_req *r);
fe_code br_req_wait(br_req *r, int64_t timeout_ms, bool *gave_up);
void br_set_link(br_conn *c, br_link link, const char *reason);
bool br_set_consumer(br_conn *c, br_cons cons, const char *reason);
void br_first_attempt_done(br_conn *c);
void br_cache_probe(br_conn *c, const char *queue, const br_probe *p);
/* Forget queue's cached probe: what it said is out of date (the gate's
 * answer, before the declare made the queue and the consume read it). */
void br_uncache_probe(br_conn *c, const char *queue);
/* connection.blocked / unblocked (and unblocked when the connection goes) */
void br_set_blocked(br_conn *c, bool blocked, const char *reason);

/* Asynchronous publishes (br_publish_start).  br_timed_add: r is in the
 * broker thread's hands now (its deadline is watched).  br_timed_tick:
 * tell FE_TIMEOUT to every one whose deadline is at least late_ms past
 * (the broker thread: 0; the watchdog: its backstop); returns the ms until
 * the next deadline, or -1 when none waits. */
void br_timed_add(br_conn *c, br_req *r);
int64_t br_timed_tick(br_conn *c, int64_t late_ms);

#endif
