/* SPDX-License-Identifier: Apache-2.0 */
/* herdr/backend.c — the backends' config, copied so each backend owns it. */
#include "herdr/backend.h"

#include <glib.h>

ib_config *ib_config_copy(const ib_config *cfg)
{
    ib_config *c = g_new0(ib_config, 1);
    c->coord_id = g_strdup(cfg->coord_id);
    c->inject_target = g_strdup(cfg->inject_target);
    c->state_dir = g_strdup(cfg->state_dir);
    c->herdr_socket = g_strdup(cfg->herdr_socket);
    c->call_ms = cfg->call_ms;
    c->prompt_ms = cfg->prompt_ms;
    c->settle_ms = cfg->settle_ms;
    c->quiet_ms = cfg->quiet_ms;
    c->inject_commands = (const char *const *)g_strdupv((char **)cfg->inject_commands);
    if (!c->inject_commands)
        c->inject_commands = (const char *const *)g_new0(char *, 1);
    return c;
}

void ib_config_free(ib_config *c)
{
    if (!c)
        return;
    g_free((char *)c->coord_id);
    g_free((char *)c->inject_target);
    g_free((char *)c->state_dir);
    g_free((char *)c->herdr_socket);
    g_strfreev((char **)c->inject_commands);
    g_free(c);
}
