/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/os/os_proc.c — a process's facts for the tmux backend's check
 * that a pane runs an agent, not a shell (herdr/foreground.c; design in
 * os.h).  Linux: /proc, in the portable build too (Linux has no other
 * route to a terminal's foreground group and a process's wait channel);
 * macOS: sysctl KERN_PROC_PID and KERN_PROCARGS2 (compiled for macOS in
 * CI, not yet run on a Mac); elsewhere nothing is known. */
#include "fleetfs/os/os.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>

#if defined(__linux__)
#include <dirent.h>
#include <sys/sysmacros.h>
#elif defined(__APPLE__)
#include <sys/proc.h>
#include <sys/sysctl.h>
#endif

#if defined(__linux__)

int os_proc_facts_of(int pid, os_proc_facts *f)
{
    char path[64], buf[1024], *close_paren, state;
    int tty_nr;
    FILE *fp;
    size_t len;

    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    if (!(fp = fopen(path, "re")))
        return -1;
    len = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[len] = '\0';
    /* the name is in parentheses and may itself hold ") " */
    if (!(close_paren = strrchr(buf, ')')) ||
        sscanf(close_paren + 1, " %c %d %d %d %d %d", &state, &f->ppid, &f->pgrp, &f->session,
               &tty_nr, &f->tpgid) != 6)
        return -1;
    /* tty_nr: the major in bits 8-15, the minor in 0-7 and 20-31 */
    f->tty = tty_nr == 0
                 ? 0
                 : makedev(((unsigned)tty_nr >> 8) & 0xfff,
                           ((unsigned)tty_nr & 0xff) | (((unsigned)tty_nr >> 12) & 0xfff00));
    return 0;
}

int *os_proc_list(size_t *n)
{
    DIR *d = opendir("/proc");
    struct dirent *de;
    GArray *a;

    *n = 0;
    if (!d)
        return NULL;
    a = g_array_new(FALSE, FALSE, sizeof(int));
    while ((de = readdir(d))) {
        int pid = atoi(de->d_name);
        if (pid > 0)
            g_array_append_val(a, pid);
    }
    closedir(d);
    *n = a->len;
    return (int *)g_array_free(a, FALSE);
}

char **os_proc_argv(int pid)
{
    char path[64];
    gchar *text = NULL;
    gsize len = 0;
    GPtrArray *a = g_ptr_array_new();

    snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
    if (g_file_get_contents(path, &text, &len, NULL))
        for (gsize i = 0; i < len; i += strlen(text + i) + 1)
            g_ptr_array_add(a, g_strdup(text + i));
    g_free(text);
    g_ptr_array_add(a, NULL);
    return (char **)g_ptr_array_free(a, FALSE);
}

/* /proc/PID/WHAT, one short line */
static void read_word(int pid, const char *what, char *out, size_t n)
{
    char path[64];
    gchar *text = NULL;
    snprintf(path, sizeof path, "/proc/%d/%s", pid, what);
    out[0] = '\0';
    if (g_file_get_contents(path, &text, NULL, NULL))
        g_strlcpy(out, g_strstrip(text), n);
    g_free(text);
}

void os_proc_comm(int pid, char *out, size_t n)
{
    read_word(pid, "comm", out, n);
}

bool os_proc_waits_for_child(int pid)
{
    char w[48];
    read_word(pid, "wchan", w, sizeof w);
    return !strcmp(w, "do_wait");
}

#elif defined(__APPLE__)

static int kinfo(int pid, struct kinfo_proc *kp)
{
    int mib[4] = {CTL_KERN, KERN_PROC, KERN_PROC_PID, pid};
    size_t len = sizeof *kp;
    if (sysctl(mib, 4, kp, &len, NULL, 0) < 0 || len != sizeof *kp)
        return -1;
    return 0;
}

int os_proc_facts_of(int pid, os_proc_facts *f)
{
    struct kinfo_proc kp;
    if (kinfo(pid, &kp) < 0)
        return -1;
    f->ppid = kp.kp_eproc.e_ppid;
    f->pgrp = kp.kp_eproc.e_pgid;
    f->session = getsid(pid);
    f->tpgid = kp.kp_eproc.e_tpgid;
    f->tty = kp.kp_eproc.e_tdev == NODEV ? 0 : kp.kp_eproc.e_tdev;
    return f->session < 0 ? -1 : 0;
}

int *os_proc_list(size_t *n)
{
    int mib[3] = {CTL_KERN, KERN_PROC, KERN_PROC_ALL};
    size_t len = 0;
    struct kinfo_proc *kp = NULL;
    int *out;

    *n = 0;
    /* the table grows between the two calls: room for some more */
    for (int tries = 0; tries < 3; tries++) {
        if (sysctl(mib, 3, NULL, &len, NULL, 0) < 0)
            return NULL;
        len += 64 * sizeof *kp;
        kp = g_realloc(kp, len);
        if (sysctl(mib, 3, kp, &len, NULL, 0) == 0)
            break;
        len = 0;
    }
    if (len == 0) {
        g_free(kp);
        return NULL;
    }
    *n = len / sizeof *kp;
    out = g_new(int, *n ? *n : 1);
    for (size_t i = 0; i < *n; i++)
        out[i] = kp[i].kp_proc.p_pid;
    g_free(kp);
    return out;
}

/* KERN_PROCARGS2: argc, the executable's path, NULs, then argv[0..argc) */
char **os_proc_argv(int pid)
{
    int mib[3] = {CTL_KERN, KERN_PROCARGS2, pid}, argc;
    size_t len = 0;
    char *buf = NULL, *p, *end;
    GPtrArray *a = g_ptr_array_new();

    if (sysctl(mib, 3, NULL, &len, NULL, 0) == 0 && len > sizeof argc) {
        buf = g_malloc(len);
        if (sysctl(mib, 3, buf, &len, NULL, 0) == 0 && len > sizeof argc) {
            memcpy(&argc, buf, sizeof argc);
            p = buf + sizeof argc;
            end = buf + len;
            p += strnlen(p, (size_t)(end - p)); /* the executable's path */
            while (p < end && *p == '\0')
                p++;
            for (int i = 0; i < argc && p < end; i++) {
                size_t l = strnlen(p, (size_t)(end - p));
                g_ptr_array_add(a, g_strndup(p, l));
                p += l + 1;
            }
        }
    }
    g_free(buf);
    g_ptr_array_add(a, NULL);
    return (char **)g_ptr_array_free(a, FALSE);
}

void os_proc_comm(int pid, char *out, size_t n)
{
    struct kinfo_proc kp;
    out[0] = '\0';
    if (kinfo(pid, &kp) == 0)
        g_strlcpy(out, kp.kp_proc.p_comm, n);
}

/* macOS names no wait channel a process could be checked by */
bool os_proc_waits_for_child(int pid)
{
    (void)pid;
    return false;
}

#else

int os_proc_facts_of(int pid, os_proc_facts *f)
{
    (void)pid;
    (void)f;
    return -1;
}

int *os_proc_list(size_t *n)
{
    *n = 0;
    return NULL;
}

char **os_proc_argv(int pid)
{
    (void)pid;
    return g_new0(char *, 1);
}

void os_proc_comm(int pid, char *out, size_t n)
{
    (void)pid;
    if (n)
        out[0] = '\0';
}

bool os_proc_waits_for_child(int pid)
{
    (void)pid;
    return false;
}

#endif
