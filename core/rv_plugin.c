/*
 * Transport plugin loader.
 *
 * A transport named NAME lives in librivet-NAME.so, searched for in order:
 *   1. every folder of RIVET_PLUGIN_PATH (colon-separated);
 *   2. the folder librivet.so itself was loaded from (build/lib in a build
 *      tree) and its "rivet" subfolder (the install layout: libdir/rivet);
 *   3. the install plugin folder compiled in (RIVET_PLUGIN_DIR).
 * A name that is not found is an error that lists what is available.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rv_core.h"

#ifndef RIVET_PLUGIN_DIR
#define RIVET_PLUGIN_DIR "/usr/local/lib/rivet"
#endif

#define MAX_DIRS 32

typedef struct {
    char *dirs[MAX_DIRS];
    int n;
} dir_list_t;

static void dirs_add(dir_list_t *l, const char *dir, size_t len)
{
    if (len == 0 || l->n == MAX_DIRS)
        return;
    for (int i = 0; i < l->n; i++)
        if (strlen(l->dirs[i]) == len && strncmp(l->dirs[i], dir, len) == 0)
            return;
    l->dirs[l->n] = strndup(dir, len);
    if (l->dirs[l->n] != NULL)
        l->n++;
}

static void dirs_collect(dir_list_t *l)
{
    const char *env = getenv("RIVET_PLUGIN_PATH");
    if (env != NULL) {
        for (const char *p = env; *p != '\0';) {
            const char *end = strchrnul(p, ':');
            dirs_add(l, p, (size_t)(end - p));
            p = *end ? end + 1 : end;
        }
    }

    Dl_info info;
    if (dladdr((void *)rv__plugin_load, &info) && info.dli_fname != NULL) {
        const char *slash = strrchr(info.dli_fname, '/');
        if (slash != NULL) {
            char sub[PATH_MAX];
            size_t len = (size_t)(slash - info.dli_fname);
            dirs_add(l, info.dli_fname, len);
            snprintf(sub, sizeof(sub), "%.*s/rivet", (int)len, info.dli_fname);
            dirs_add(l, sub, strlen(sub));
        }
    }
    dirs_add(l, RIVET_PLUGIN_DIR, strlen(RIVET_PLUGIN_DIR));
}

static void dirs_free(dir_list_t *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->dirs[i]);
}

/* Lists "ucx, verbs" from every search folder into buf. */
static void list_available(const dir_list_t *l, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < l->n; i++) {
        DIR *d = opendir(l->dirs[i]);
        if (d == NULL)
            continue;
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            const char *n = e->d_name;
            size_t nl = strlen(n);
            if (strncmp(n, "librivet-", 9) != 0 || nl < 12 ||
                strcmp(n + nl - 3, ".so") != 0)
                continue;
            char name[NAME_MAX];
            snprintf(name, sizeof(name), "%.*s", (int)(nl - 12), n + 9);
            if (strstr(buf, name) != NULL)
                continue;
            used += (size_t)snprintf(buf + used, used < len ? len - used : 0,
                                     "%s%s", used ? ", " : "", name);
        }
        closedir(d);
    }
    if (buf[0] == '\0')
        snprintf(buf, len, "none");
}

rv_status_t rv__plugin_load(const char *name, void **handle_p,
                            const rv_transport_ops_t **ops_p)
{
    dir_list_t dirs = {.n = 0};
    char path[PATH_MAX], avail[512], searched[2048];
    size_t slen = 0;
    rv_status_t status = RV_ERR_NOT_FOUND;

    for (const char *c = name; *c; c++) {
        if (*c == '/' || *c == '.') {
            rv_error("transport.name '%s' is not a plugin name", name);
            return RV_ERR_CONFIG;
        }
    }

    dirs_collect(&dirs);
    searched[0] = '\0';
    for (int i = 0; i < dirs.n; i++) {
        snprintf(path, sizeof(path), "%s/librivet-%s.so", dirs.dirs[i], name);
        slen += (size_t)snprintf(searched + slen,
                                 slen < sizeof(searched) ? sizeof(searched) - slen : 0,
                                 "%s%s", slen ? ":" : "", dirs.dirs[i]);
        if (access(path, F_OK) != 0)
            continue;

        void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (handle == NULL) {
            rv_error("cannot load transport '%s' from %s: %s", name, path,
                     dlerror());
            status = RV_ERR_NOT_FOUND;
            goto out;
        }
        const rv_transport_ops_t *ops = dlsym(handle, RV_TRANSPORT_OPS_SYMBOL);
        if (ops == NULL) {
            rv_error("%s is not a rivet transport (no symbol %s)", path,
                     RV_TRANSPORT_OPS_SYMBOL);
            dlclose(handle);
            status = RV_ERR_NOT_FOUND;
            goto out;
        }
        if (ops->abi_version != RV_TRANSPORT_ABI_VERSION) {
            rv_error("%s implements transport ABI %d, this rivet needs %d; "
                     "rebuild the plugin", path, ops->abi_version,
                     RV_TRANSPORT_ABI_VERSION);
            dlclose(handle);
            status = RV_ERR_UNSUPPORTED;
            goto out;
        }
        rv_debug("transport '%s' loaded from %s", name, path);
        *handle_p = handle;
        *ops_p = ops;
        status = RV_OK;
        goto out;
    }

    list_available(&dirs, avail, sizeof(avail));
    rv_error("no transport plugin '%s' (librivet-%s.so) in %s; available "
             "transports: %s. Set transport.name to one of them, or add the "
             "plugin's folder to RIVET_PLUGIN_PATH", name, name, searched, avail);
out:
    dirs_free(&dirs);
    return status;
}
