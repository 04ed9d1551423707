/*
 * Keys of the configuration tables: finding a dotted key's row in a
 * configuration or in any known table, sections, environment names, and
 * the message for an unknown key, with the nearest valid key or section
 * across every table (plugins in the plugin path included) as a
 * suggestion.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "rv_config_internal.h"
#include "rv_core.h"

#define TRANSPORT_PREFIX "transport."
#define TRANSPORT_PREFIX_LEN (sizeof(TRANSPORT_PREFIX) - 1)
#define NAMES_MAX 512 /* "ucx, verbs": the transports found, for messages */

void rv__config_full_key(const rv_config_table_t *t, const rv_config_field_t *f,
                         char *buf, size_t len)
{
    snprintf(buf, len, "%s%s%s", t->prefix, t->prefix[0] ? "." : "", f->name);
}

const rv_config_field_t *rv__config_table_field(const rv_config_table_t *table,
                                                const char *key)
{
    size_t plen = strlen(table->prefix);

    if (plen > 0) {
        if (strncmp(key, table->prefix, plen) != 0 || key[plen] != '.')
            return NULL;
        key += plen + 1;
    }
    for (const rv_config_field_t *f = table->fields; f->name != NULL; f++) {
        if (strcmp(f->name, key) == 0)
            return f;
    }
    return NULL;
}

const rv_config_field_t *rv__config_find(const rv_config_t *cfg,
                                         const char *key,
                                         rv_config_comp_t **comp_p)
{
    for (size_t i = 0; i < cfg->ncomps; i++) {
        const rv_config_field_t *f =
            rv__config_table_field(cfg->comps[i].table, key);
        if (f != NULL) {
            if (comp_p != NULL)
                *comp_p = &cfg->comps[i];
            return f;
        }
    }
    return NULL;
}

const rv_config_field_t *rv__config_find_any(const char *key,
                                             const rv_config_table_t **table_p)
{
    const rv_config_table_t *tables[RV_CFG_MAX_TABLES], *t;
    size_t n = rv__config_tables(tables, false);
    const rv_config_field_t *f;
    char name[RV_CFG_KEY_MAX], why[RV_CFG_MSG_MAX];

    for (size_t i = 0; i < n; i++) {
        f = rv__config_table_field(tables[i], key);
        if (f != NULL) {
            *table_p = tables[i];
            return f;
        }
    }
    if (!rv__config_plugin_of(key, name, sizeof(name)) ||
        rv__config_plugin_table(name, &t, why, sizeof(why)) != RV_OK ||
        t == NULL || (f = rv__config_table_field(t, key)) == NULL)
        return NULL;
    *table_p = t;
    return f;
}

/* True if some row of @p t has a full key starting with @p section and a
 * dot. */
static bool table_has_section(const rv_config_table_t *t, const char *section)
{
    size_t slen = strlen(section);

    for (const rv_config_field_t *f = t->fields; f->name != NULL; f++) {
        char key[RV_CFG_KEY_MAX];
        rv__config_full_key(t, f, key, sizeof(key));
        if (strncmp(key, section, slen) == 0 && key[slen] == '.')
            return true;
    }
    return false;
}

bool rv__config_is_section(const rv_config_t *cfg, const char *section)
{
    for (size_t i = 0; i < cfg->ncomps; i++) {
        if (table_has_section(cfg->comps[i].table, section))
            return true;
    }
    return false;
}

bool rv__config_plugin_of(const char *key, char *name, size_t len)
{
    char section[RV_CFG_KEY_MAX];
    size_t nlen;

    if (strncmp(key, TRANSPORT_PREFIX, TRANSPORT_PREFIX_LEN) != 0)
        return false;
    nlen = strcspn(key + TRANSPORT_PREFIX_LEN, ".");
    if (nlen == 0 || nlen >= len ||
        TRANSPORT_PREFIX_LEN + nlen >= sizeof(section))
        return false;
    /* transport.name is core's key, not a plugin called "name". */
    snprintf(section, sizeof(section), "%.*s",
             (int)(TRANSPORT_PREFIX_LEN + nlen), key);
    if (rv__config_table_field(&rv__config_core_table, section) != NULL)
        return false;
    snprintf(name, len, "%.*s", (int)nlen, key + TRANSPORT_PREFIX_LEN);
    return true;
}

void rv__config_env_name(const char *key, char *buf, size_t len)
{
    size_t n = (size_t)snprintf(buf, len, "RIVET_");

    for (const char *p = key; *p != '\0' && n + 1 < len; p++)
        buf[n++] = (*p == '.') ? '_' : (char)toupper((unsigned char)*p);
    buf[n < len ? n : len - 1] = '\0';
}

/* ---------------------------------------------------------------------- */
/* Suggestions                                                             */
/* ---------------------------------------------------------------------- */

/*
 * Levenshtein distance when it is at most @p limit, else limit + 1; strings
 * longer than RV_CFG_KEY_MAX count as far. Bounded because a file full of
 * unknown keys compares each with every key of every table: lengths that
 * differ by more than the limit need no table, and a row whose every
 * entry is past the limit ends the walk (a row's minimum never falls).
 */
size_t rv__config_distance(const char *a, const char *b, size_t limit)
{
    size_t la = strlen(a), lb = strlen(b);
    size_t row[RV_CFG_KEY_MAX + 1];

    if (la > RV_CFG_KEY_MAX || lb > RV_CFG_KEY_MAX ||
        (la > lb ? la - lb : lb - la) > limit)
        return limit + 1;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0], least;
        row[0] = least = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
            if (best < least)
                least = best;
        }
        if (least > limit)
            return limit + 1;
    }
    return row[lb] <= limit ? row[lb] : limit + 1;
}

/* How many edits a name of @p len characters may be from a suggestion. */
size_t rv__config_distance_limit(size_t len)
{
    return len <= 4 ? 1 : len <= 8 ? 2 : 3;
}

static const char *last_component(const char *key)
{
    const char *dot = strrchr(key, '.');
    return dot != NULL ? dot + 1 : key;
}

typedef struct suggestion {
    char name[RV_CFG_KEY_MAX + 1];
    size_t score, full; /* best of both distances; full-path distance */
} suggestion_t;

/* Considers candidate @p cand (a key or section) as a suggestion for @p key.
 * A candidate counts when either distance is within its limit, so its
 * score is within the larger limit, and only those are computed exactly;
 * the full distance that breaks a tie is, when it is needed. */
static void consider(suggestion_t *s, const char *key, const char *cand)
{
    size_t lim_full = rv__config_distance_limit(strlen(key));
    size_t lim_last = rv__config_distance_limit(strlen(last_component(key)));
    size_t lim = lim_full > lim_last ? lim_full : lim_last;
    size_t full = rv__config_distance(key, cand, lim);
    size_t last =
        rv__config_distance(last_component(key), last_component(cand), lim);
    size_t score = full < last ? full : last;

    if ((full > lim_full && last > lim_last) || score > s->score)
        return;
    if (full > lim)
        full = rv__config_distance(key, cand, SIZE_MAX / 2);
    if (score < s->score || full < s->full) {
        snprintf(s->name, sizeof(s->name), "%s", cand);
        s->score = score;
        s->full = full;
    }
}

/* Every proper prefix of @p key ending before a dot is a section. */
static void consider_sections(suggestion_t *s, const char *key,
                              const char *cand)
{
    for (const char *dot = strchr(cand, '.'); dot != NULL;
         dot = strchr(dot + 1, '.')) {
        char section[RV_CFG_KEY_MAX + 1];
        size_t len = (size_t)(dot - cand);
        if (len > RV_CFG_KEY_MAX)
            break;
        memcpy(section, cand, len);
        section[len] = '\0';
        consider(s, key, section);
    }
}

/*
 * The valid key (@p sections false) or section (@p sections true) of any
 * table known to the process, plugins in the plugin path included, nearest
 * to @p key; false if none is close.
 */
static bool suggest(const char *key, bool sections, char *out, size_t outlen)
{
    const rv_config_table_t *tables[RV_CFG_MAX_TABLES];
    size_t n = rv__config_tables(tables, true);
    suggestion_t s = {.name = "", .score = SIZE_MAX, .full = SIZE_MAX};

    /* Comparing both the full dotted paths and their last components
     * finds "transport.ucx.tls" for "transport.tls". */
    for (size_t i = 0; i < n; i++) {
        for (const rv_config_field_t *f = tables[i]->fields; f->name != NULL;
             f++) {
            char cand[RV_CFG_KEY_MAX];
            rv__config_full_key(tables[i], f, cand, sizeof(cand));
            if (sections)
                consider_sections(&s, key, cand);
            else
                consider(&s, key, cand);
        }
    }
    snprintf(out, outlen, "%s", s.name);
    return s.name[0] != '\0';
}

/* Writes "; did you mean 'S'?" for @p key, preferring the kind asked. */
static void suggestion_text(const char *key, bool section, char *buf,
                            size_t len)
{
    char s[RV_CFG_KEY_MAX + 1];

    if (suggest(key, section, s, sizeof(s)) ||
        suggest(key, !section, s, sizeof(s)))
        snprintf(buf, len, "; did you mean '%s'?", s);
    else
        buf[0] = '\0';
}

/* The plugin name nearest to the one asked for, for a suggestion. */
typedef struct {
    const char *want;
    char best[RV_CFG_KEY_MAX];
    size_t score;
} plugin_guess_t;

static void guess_one(const char *name, void *arg)
{
    plugin_guess_t *g = arg;
    size_t limit = rv__config_distance_limit(strlen(g->want));
    size_t d = rv__config_distance(g->want, name, limit);

    if (d <= limit && d < g->score) {
        snprintf(g->best, sizeof(g->best), "%s", name);
        g->score = d;
    }
}

/*
 * Writes the message for @p key of transport plugin @p name when that
 * plugin is missing (suggesting the nearest plugin's section, else listing
 * those found), broken or without keys; false when it has keys (the key
 * itself is what is unknown).
 */
static bool plugin_missing(const char *key, const char *what, const char *name,
                           char *buf, size_t len)
{
    plugin_guess_t g = {.want = name, .best = "", .score = SIZE_MAX};
    const rv_config_table_t *table;
    char why[RV_CFG_MSG_MAX], names[NAMES_MAX];
    rv_status_t status;

    status = rv__config_plugin_table(name, &table, why, sizeof(why));
    if (status == RV_ERR_NOT_FOUND)
        rv__plugin_foreach(guess_one, &g);
    if (status == RV_ERR_NOT_FOUND && g.best[0] != '\0') {
        snprintf(buf, len,
                 "unknown %s '%s': no transport plugin "
                 "librivet-%s.so; did you mean '" TRANSPORT_PREFIX "%s'?",
                 what, key, name, g.best);
    } else if (status == RV_ERR_NOT_FOUND) {
        rv__plugin_names(names, sizeof(names));
        snprintf(buf, len,
                 "unknown %s '%s': no transport plugin "
                 "librivet-%s.so (available transports: %s)",
                 what, key, name, names);
    } else if (status != RV_OK) {
        snprintf(buf, len, "%s: %s", key, why);
    } else if (table == NULL) {
        snprintf(buf, len,
                 "unknown %s '%s': the transport plugin "
                 "librivet-%s.so has no configuration keys",
                 what, key, name);
    } else {
        return false;
    }
    return true;
}

void rv__config_unknown(const char *key, bool section, char *buf, size_t len)
{
    const char *what = section ? "section" : "key";
    char name[RV_CFG_KEY_MAX], more[RV_CFG_KEY_MAX + 32];

    /* transport.NAME as a section, or a key under it, is a plugin's;
     * transport.NAME as a single value is a misplaced key. */
    if (rv__config_plugin_of(key, name, sizeof(name)) &&
        (section || strchr(key + TRANSPORT_PREFIX_LEN, '.') != NULL) &&
        plugin_missing(key, what, name, buf, len))
        return;
    suggestion_text(key, section, more, sizeof(more));
    if (more[0] != '\0')
        snprintf(buf, len, "unknown %s '%s'%s", what, key, more);
    else
        snprintf(buf, len,
                 "unknown %s '%s' (rivet-config --reference "
                 "lists every key)",
                 what, key);
}
