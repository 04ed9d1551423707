/*
 * Transport plugin loader.
 *
 * A transport named NAME lives in librivet-NAME.so, searched for in order:
 *   1. every folder of RIVET_PLUGIN_PATH (colon-separated);
 *   2. the folder librivet.so itself was loaded from (build/lib in a build
 *      tree) and its "rivet" subfolder (the install layout: libdir/rivet);
 *   3. the same beside the running program's own file (/proc/self/exe,
 *      symlinks resolved): its folder and, from bin/, the installation's
 *      libdir and libdir/rivet, wherever the installation was moved;
 *   4. the install plugin folder compiled in (RIVET_PLUGIN_DIR).
 * RIVET_PLUGIN_PATH comes first so that a user can always override what
 * an installation carries, as UCX_MODULE_DIR does for UCX's modules.
 * A name that is not found is an error that lists what is available.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rv_core.h"

#ifndef RIVET_PLUGIN_LIBDIR
#define RIVET_PLUGIN_LIBDIR "lib"
#endif

#ifndef RIVET_PLUGIN_DIR
#define RIVET_PLUGIN_DIR "/usr/local/lib/rivet"
#endif

#define MAX_DIRS 32
#define PLUGIN_PREFIX "librivet-"
#define PLUGIN_PREFIX_LEN (sizeof(PLUGIN_PREFIX) - 1)
#define PLUGIN_SUFFIX ".so"
#define PLUGIN_SUFFIX_LEN (sizeof(PLUGIN_SUFFIX) - 1)
#define PLUGIN_WHY_MAX 4096 /* a loader message: the folders searched */

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

/* Adds the folders where plugins sit relative to the file @p path (after
 * its symlinks are resolved): beside it, its "rivet" subfolder (the
 * install layout: libdir/rivet), and, for a program in bin/, the lib/ and
 * lib/rivet/ next to it. */
static void dirs_add_near(dir_list_t *l, const char *path)
{
    static const char *const rel[] = {"",
                                      "/rivet",
                                      "/../lib",
                                      "/../lib/rivet",
                                      "/../" RIVET_PLUGIN_LIBDIR,
                                      "/../" RIVET_PLUGIN_LIBDIR "/rivet"};
    char file[PATH_MAX];
    if (realpath(path, file) == NULL)
        return;
    char *slash = strrchr(file, '/');
    if (slash == NULL)
        return;
    *slash = '\0';
    for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
        char sub[PATH_MAX + 32], real[PATH_MAX];
        snprintf(sub, sizeof(sub), "%s%s", file, rel[i]);
        if (realpath(sub, real) != NULL)
            dirs_add(l, real, strlen(real));
    }
}

/* The folders beside librivet's own file and the running program's, with
 * their symlinks resolved. Neither file changes while the process runs,
 * so they are resolved once: resolving them costs a readlink per path
 * component, and a configuration error's suggestions list the plugins
 * (so search these folders) for every key they weigh. */
static dir_list_t near_dirs;
static pthread_once_t near_once = PTHREAD_ONCE_INIT;

static void near_dirs_resolve(void)
{
    /* librivet's own file (build/lib in a build tree, libdir when
     * installed), then the running program's: a program that carries
     * core itself (rivetrun, rivet-config) has no librivet to ask, and
     * dladdr names it by argv[0], which is a bare name when it was
     * started from PATH. The kernel's /proc/self/exe is its real file
     * however it was started (PATH, a symlink, a full path). */
    Dl_info info;
    if (dladdr((void *)rv__plugin_load, &info) && info.dli_fname != NULL &&
        strchr(info.dli_fname, '/') != NULL)
        dirs_add_near(&near_dirs, info.dli_fname);
    dirs_add_near(&near_dirs, "/proc/self/exe");
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
    pthread_once(&near_once, near_dirs_resolve);
    for (int i = 0; i < near_dirs.n; i++)
        dirs_add(l, near_dirs.dirs[i], strlen(near_dirs.dirs[i]));
    dirs_add(l, RIVET_PLUGIN_DIR, strlen(RIVET_PLUGIN_DIR));
}

static void dirs_free(dir_list_t *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->dirs[i]);
}

/* A list of plugin names, each once. */
typedef struct {
    char **names;
    size_t n, cap;
} name_set_t;

static void names_add(name_set_t *set, const char *name, size_t len)
{
    for (size_t i = 0; i < set->n; i++)
        if (strlen(set->names[i]) == len &&
            strncmp(set->names[i], name, len) == 0)
            return;
    if (set->n == set->cap) {
        size_t cap = set->cap ? 2 * set->cap : 8;
        char **bigger = realloc(set->names, cap * sizeof(*bigger));
        if (bigger == NULL)
            return;
        set->names = bigger;
        set->cap = cap;
    }
    set->names[set->n] = strndup(name, len);
    if (set->names[set->n] != NULL)
        set->n++;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Calls @p fn with the name of every plugin in the search folders, once
 * each, in alphabetical order (messages list them the same way on every
 * file system). */
static void foreach_plugin(const dir_list_t *l,
                           void (*fn)(const char *name, void *arg), void *arg)
{
    name_set_t set = {.names = NULL, .n = 0, .cap = 0};

    for (int i = 0; i < l->n; i++) {
        DIR *d = opendir(l->dirs[i]);
        if (d == NULL)
            continue;
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            const char *n = e->d_name;
            size_t nl = strlen(n);
            if (strncmp(n, PLUGIN_PREFIX, PLUGIN_PREFIX_LEN) != 0 ||
                nl < PLUGIN_PREFIX_LEN + PLUGIN_SUFFIX_LEN + 1 ||
                strcmp(n + nl - PLUGIN_SUFFIX_LEN, PLUGIN_SUFFIX) != 0)
                continue;
            names_add(&set, n + PLUGIN_PREFIX_LEN,
                      nl - PLUGIN_PREFIX_LEN - PLUGIN_SUFFIX_LEN);
        }
        closedir(d);
    }
    if (set.n > 0)
        qsort(set.names, set.n, sizeof(*set.names), name_cmp);
    for (size_t i = 0; i < set.n; i++) {
        fn(set.names[i], arg);
        free(set.names[i]);
    }
    free(set.names);
}

typedef struct {
    char *buf;
    size_t len, used;
} name_list_t;

static void list_one(const char *name, void *arg)
{
    name_list_t *l = arg;
    l->used += (size_t)snprintf(l->buf + l->used,
                                l->used < l->len ? l->len - l->used : 0, "%s%s",
                                l->used ? ", " : "", name);
}

/* Lists "ucx, verbs" from every search folder into buf. */
static void list_available(const dir_list_t *l, char *buf, size_t len)
{
    name_list_t list = {.buf = buf, .len = len, .used = 0};

    buf[0] = '\0';
    foreach_plugin(l, list_one, &list);
    if (buf[0] == '\0')
        snprintf(buf, len, "none");
}

void rv__plugin_names(char *buf, size_t len)
{
    dir_list_t dirs = {.n = 0};

    dirs_collect(&dirs);
    list_available(&dirs, buf, len);
    dirs_free(&dirs);
}

void rv__plugin_foreach(void (*fn)(const char *name, void *arg), void *arg)
{
    dir_list_t dirs = {.n = 0};

    dirs_collect(&dirs);
    foreach_plugin(&dirs, fn, arg);
    dirs_free(&dirs);
}

/* Opens @p path and checks it is a transport of this ABI. */
static rv_status_t plugin_open(const char *name, const char *path,
                               void **handle_p,
                               const rv_transport_ops_t **ops_p, char *why,
                               size_t whylen)
{
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        snprintf(why, whylen, "cannot load transport '%s' from %s: %s", name,
                 path, dlerror());
        return RV_ERR_NOT_FOUND;
    }
    const rv_transport_ops_t *ops = dlsym(handle, RV_TRANSPORT_OPS_SYMBOL);
    if (ops == NULL) {
        snprintf(why, whylen, "%s is not a rivet transport (no symbol %s)",
                 path, RV_TRANSPORT_OPS_SYMBOL);
        dlclose(handle);
        return RV_ERR_NOT_FOUND;
    }
    if (ops->abi_version != RV_TRANSPORT_ABI_VERSION) {
        snprintf(why, whylen,
                 "%s implements transport ABI %d, this rivet needs %d; "
                 "rebuild the plugin",
                 path, ops->abi_version, RV_TRANSPORT_ABI_VERSION);
        dlclose(handle);
        return RV_ERR_UNSUPPORTED;
    }
    rv_debug("transport '%s' loaded from %s", name, path);
    *handle_p = handle;
    *ops_p = ops;
    return RV_OK;
}

rv_status_t rv__plugin_find(const char *name, void **handle_p,
                            const rv_transport_ops_t **ops_p, char *why,
                            size_t whylen)
{
    dir_list_t dirs = {.n = 0};
    char path[PATH_MAX], avail[512], searched[2048];
    size_t slen = 0;
    rv_status_t status;

    for (const char *c = name; *c; c++) {
        if (*c == '/' || *c == '.') {
            snprintf(why, whylen, "transport.name '%s' is not a plugin name",
                     name);
            return RV_ERR_CONFIG;
        }
    }

    dirs_collect(&dirs);
    searched[0] = '\0';
    for (int i = 0; i < dirs.n; i++) {
        snprintf(path, sizeof(path), "%s/" PLUGIN_PREFIX "%s" PLUGIN_SUFFIX,
                 dirs.dirs[i], name);
        slen += (size_t)snprintf(
            searched + slen,
            slen < sizeof(searched) ? sizeof(searched) - slen : 0, "%s%s",
            slen ? ":" : "", dirs.dirs[i]);
        if (access(path, F_OK) != 0)
            continue;
        status = plugin_open(name, path, handle_p, ops_p, why, whylen);
        goto out;
    }

    list_available(&dirs, avail, sizeof(avail));
    snprintf(why, whylen,
             "no transport plugin '%s' (librivet-%s.so) in %s; available "
             "transports: %s. Set transport.name to one of them, or add the "
             "plugin's folder to RIVET_PLUGIN_PATH",
             name, name, searched, avail);
    status = RV_ERR_NOT_FOUND;
out:
    dirs_free(&dirs);
    return status;
}

rv_status_t rv__plugin_load(const char *name, void **handle_p,
                            const rv_transport_ops_t **ops_p)
{
    char why[PLUGIN_WHY_MAX];
    rv_status_t status =
        rv__plugin_find(name, handle_p, ops_p, why, sizeof(why));

    if (status != RV_OK)
        rv_error("%s", why);
    return status;
}
