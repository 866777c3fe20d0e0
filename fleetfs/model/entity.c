/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/model/entity.c — one entity's mailbox as every part of the model
 * reaches it: its references (mb_ref, mb_unref), its look-up among the
 * host's entities, its names, and the few things each part does to it
 * (an mtime touched, a change told to the tree, a rejection counted, a
 * degraded log said).  The bottom of the model: it calls none of the
 * other files.  The last mb_unref frees the entity through the host's
 * free_entity, which mailbox.c sets (its entity_free frees every part's
 * state, so it lives above them).
 */
#include "fleetfs/model/mb_int.h"

#include <string.h>

#include "fleetfs/base/log.h"

void mb_touch_locked(mailbox *mb, mb_file f)
{
    mb->mtime[f] = env_now_ms();
}

void mb_changed(mailbox *mb, const char *relpath)
{
    if (mb->hooks.changed)
        mb->hooks.changed(mb->hooks.ud, relpath);
}

void mb_count_rejection_locked(mailbox *mb, const char *reason)
{
    gpointer old = g_hash_table_lookup(mb->h->rejections, reason);
    g_hash_table_replace(mb->h->rejections, g_strdup(reason),
                         GUINT_TO_POINTER(GPOINTER_TO_UINT(old) + 1));
    mb->n.rejected++;
    mb->n.dead_lettered++;
}

void mb_warn_if_degraded(const applog *log, const char *what)
{
    if (applog_failed(log))
        log_warn("%s: %s ends in a torn line that the disk would not let us close (%s): it is "
                 "cut off and every whole line is loaded; until a write works again new records "
                 "live in memory only: free space",
                 what, applog_path(log), g_strerror(applog_failed(log)));
}

mailbox *mb_ref(mailbox *mb)
{
    if (!mb->lead) /* the lead lives until mb_free: not counted */
        g_atomic_ref_count_inc(&mb->ref);
    return mb;
}

void mb_unref(mailbox *mb)
{
    /* the lead lives until mb_free, whatever its count says */
    if (mb && !mb->lead && g_atomic_ref_count_dec(&mb->ref))
        mb->h->free_entity(mb); /* mailbox.c's, which frees every part */
}

mailbox *mb_find(mailbox *any, const char *id)
{
    mailbox *found = NULL;
    mb_host *h = any->h;
    g_mutex_lock(&h->lock);
    found = mb_find_locked(h, id);
    if (found)
        mb_ref(found);
    g_mutex_unlock(&h->lock);
    return found;
}

mailbox *mb_find_box(mailbox *any, unsigned box)
{
    mailbox *found = NULL;
    mb_host *h = any->h;
    g_mutex_lock(&h->lock);
    for (guint i = 0; i < h->entities->len && !found; i++)
        if (((mailbox *)h->entities->pdata[i])->box == box)
            found = mb_ref(h->entities->pdata[i]);
    g_mutex_unlock(&h->lock);
    return found;
}

mailbox *mb_find_locked(mb_host *h, const char *id)
{
    for (guint i = 0; i < h->entities->len; i++) {
        mailbox *mb = h->entities->pdata[i];
        if (!strcmp(mb->id, id))
            return mb;
    }
    return NULL;
}

GPtrArray *mb_entities(mailbox *any)
{
    GPtrArray *out;
    g_mutex_lock(any->lock);
    out = g_ptr_array_new_full(any->h->entities->len, (GDestroyNotify)mb_unref);
    for (guint i = 0; i < any->h->entities->len; i++)
        g_ptr_array_add(out, mb_ref(any->h->entities->pdata[i]));
    g_mutex_unlock(any->lock);
    return out;
}

void mb_id_host(const char *id, char *out, size_t n)
{
    const char *at = strchr(id, '@');
    g_strlcpy(out, at ? at + 1 : id, n);
}

const char *mb_id(const mailbox *mb)
{
    return mb->id;
}

const char *mb_name(const mailbox *mb)
{
    return mb->name;
}

bool mb_is_lead(const mailbox *mb)
{
    return mb->lead;
}

unsigned mb_box(const mailbox *mb)
{
    return mb->box;
}

const char *mb_state_dir(const mailbox *mb)
{
    return mb->state_dir;
}
