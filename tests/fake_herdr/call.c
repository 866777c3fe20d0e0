/* SPDX-License-Identifier: Apache-2.0 */
/* call.c — fake-herdr --call: one herdr request from the shell.
 *
 * Lets shell tests talk to any herdr-speaking socket through the real
 * client (herdr/client.c) instead of socat or python. Prints one line:
 *   ok <result JSON>          exit 0
 *   <kind> <code> <message>   exit 1  (kind: remote, down, timeout, ...) */
#include "tests/fake_herdr/fake_herdr.h"
#include "herdr/client.h"

#include <stdio.h>
#include <stdlib.h>

int fh_call_main(const char *socket_path, const char *method, const char *params, int timeout_ms)
{
    hd_client *c = hd_client_new(socket_path);
    json_t *p = params ? json_loads(params, 0, NULL) : NULL;
    hd_reply rep = {0};
    int rc = 1;

    if (!c || (params && !p)) {
        fprintf(stderr, "fake-herdr: bad --params or socket\n");
        hd_client_free(c);
        return 2;
    }
    if (hd_call(c, method, p, timeout_ms, &rep) == HD_OK) {
        char *s = json_dumps(rep.result, JSON_COMPACT);

        printf("ok %s\n", s ? s : "?");
        free(s);
        rc = 0;
    } else {
        printf("%s %s %s\n", hd_kind_name(rep.kind), rep.code, rep.message);
    }
    hd_reply_clear(&rep);
    json_decref(p);
    hd_client_free(c);
    return rc;
}
