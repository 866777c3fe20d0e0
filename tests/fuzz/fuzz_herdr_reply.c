/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_herdr_reply.c — libFuzzer target for hd_parse_reply and the result
 * parsers behind it.
 *
 * herdr runs as the same user, but its replies carry text other programs
 * put there (pane titles, labels, agent names), so they are untrusted. The
 * first byte picks the id we expect (none, "1", or "") so the id-matching
 * paths are reached; the rest is the reply line. When a reply parses, its
 * result goes through every typed parser, as the typed calls would. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "herdr/client.h"

static void fz_results(const json_t *res)
{
    hd_pane p;
    hd_agent a;
    hd_version v;
    const json_t *arr, *item;
    size_t i;

    hd_parse_pane(res, &p);
    hd_parse_agent(res, &a);
    hd_parse_version(res, &v);
    hd_parse_pane(json_object_get(res, "pane"), &p);
    hd_parse_agent(json_object_get(res, "agent"), &a);
    arr = json_object_get(res, "panes");
    json_array_foreach(arr, i, item) hd_parse_pane(item, &p);
    arr = json_object_get(res, "agents");
    json_array_foreach(arr, i, item) hd_parse_agent(item, &a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const ids[] = {NULL, "1", ""};
    const char *expect;
    hd_reply r;
    char *line;

    if (size == 0)
        return 0;
    expect = ids[data[0] % 3];
    line = malloc(size - 1 > 0 ? size - 1 : 1);
    if (line == NULL)
        return 0;
    memcpy(line, data + 1, size - 1);
    memset(&r, 0, sizeof(r));
    if (hd_parse_reply(line, size - 1, expect, &r) == HD_OK) {
        if (r.result == NULL)
            abort();
        fz_results(r.result);
    } else if (r.result != NULL) {
        abort();
    }
    hd_reply_clear(&r);
    free(line);
    return 0;
}
