/* SPDX-License-Identifier: Apache-2.0 */
/* broker/session.h — the life of one broker connection (session.c).  For
 * broker/ only. */
#ifndef FLEETFS_BROKER_SESSION_H
#define FLEETFS_BROKER_SESSION_H

#include "broker/conn_int.h"

void br_connect(br_conn *c);
/* The connection is gone (or given up): every part forgets what lived on
 * it.  The parts below session.c call it as br_drop_connection, through
 * the br_up hook (conn_int.h). */
void br_session_drop(br_conn *c, const char *why);
void br_close_connection(br_conn *c);
/* Drop a connection that sent nothing for two heartbeat intervals. */
void br_check_silence(br_conn *c);
/* set up what lives on a new connection: fleet.msg (where the login may) */
void br_setup_exchanges(br_conn *c);

#endif
