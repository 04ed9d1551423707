/*
 * The RIVET_* variables that name nothing.
 *
 * Every key has its variable (RIVET_SECTION_SUB_KEY, rv_config_load.c),
 * and a handful of variables are read otherwise: the launcher's (rank,
 * size, bootstrap address, the job's secret), the log level, the plugin
 * path. Any other RIVET_* variable is ignored, so a misspelled one
 * (RIVET_JOB_THRAEDS=4) would change nothing without a word; UCX warns so
 * of its unused UCX_* variables. rv_init warns of each once, on rank 0,
 * with the nearest key's variable when one is close.
 */
#include <stdio.h>
#include <string.h>

#include "rv_config_internal.h"

extern char **environ;

#define ENV_PREFIX "RIVET_"
/* "RIVET_" and a key. */
#define ENV_NAME_MAX (RV_CFG_KEY_MAX + 8)

/* Read by rivet, not keys: the launchers' (rivetrun and what PMIx jobs
 * set), the log, the plugin path, and RIVET_STATS (RIVET_JOB_STATS's
 * other spelling). */
static const char *const known[] = {
    "RIVET_RANK",
    "RIVET_SIZE",
    "RIVET_LOCAL_RANK",
    "RIVET_LOCAL_SIZE",
    "RIVET_CONFIG",
    "RIVET_BOOTSTRAP",
    "RIVET_JOB_TOKEN",
    "RIVET_LAUNCHER_PID",
    "RIVET_JOB_PGID",
    "RIVET_LOG_LEVEL",
    "RIVET_PLUGIN_PATH",
    "RIVET_STATS",
    NULL,
};

/* Reserved for rivet's own scripts, read by them, not by the library:
 * the test harness's (RIVET_TEST_REQUIRE_RDMA) and the RDMA guest's
 * (scripts/rdma-vm.sh exports RIVET_RDMA_VM_DEVICE inside it). */
static const char *const script_prefixes[] = {"RIVET_TEST_", "RIVET_RDMA_VM_",
                                              NULL};

static bool is_known(const char *name)
{
    for (const char *const *p = script_prefixes; *p != NULL; p++)
        if (strncmp(name, *p, strlen(*p)) == 0)
            return true;
    for (const char *const *k = known; *k != NULL; k++)
        if (strcmp(*k, name) == 0)
            return true;
    return false;
}

/* The variable of a key of @p cfg nearest to @p name, into @p best (empty
 * when none is close); true if @p name is exactly one. */
static bool nearest_key(const rv_config_t *cfg, const char *name, char *best,
                        size_t len)
{
    size_t best_d = rv__config_distance_limit(strlen(name)) + 1;

    best[0] = '\0';
    for (size_t i = 0; i < cfg->ncomps; i++) {
        const rv_config_table_t *t = cfg->comps[i].table;
        for (const rv_config_field_t *f = t->fields; f->name != NULL; f++) {
            char key[RV_CFG_KEY_MAX], var[ENV_NAME_MAX];
            size_t d;

            rv__config_full_key(t, f, key, sizeof(key));
            rv__config_env_name(key, var, sizeof(var));
            d = rv__config_distance(name, var, best_d);
            if (d == 0)
                return true;
            if (d < best_d) {
                best_d = d;
                snprintf(best, len, "%s", var);
            }
        }
    }
    return false;
}

int rv__config_env_check(const rv_config_t *cfg)
{
    int warned = 0;

    if (cfg == NULL)
        return 0;
    for (char **e = environ; *e != NULL; e++) {
        char name[ENV_NAME_MAX], best[ENV_NAME_MAX];
        const char *eq = strchr(*e, '=');
        size_t n = eq != NULL ? (size_t)(eq - *e) : strlen(*e);

        if (strncmp(*e, ENV_PREFIX, strlen(ENV_PREFIX)) != 0 ||
            n >= sizeof(name))
            continue;
        memcpy(name, *e, n);
        name[n] = '\0';
        if (is_known(name) || nearest_key(cfg, name, best, sizeof(best)))
            continue;
        if (best[0] != '\0')
            rv_warn("%s names no configuration key and is ignored; did you "
                    "mean %s?",
                    name, best);
        else
            rv_warn("%s names no configuration key and is ignored "
                    "(rivet-config --reference lists the keys; each key "
                    "a.b_c is RIVET_A_B_C)",
                    name);
        warned++;
    }
    return warned;
}
