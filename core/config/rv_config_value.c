/*
 * Values of configuration keys: parsing text (from the file, the
 * environment, a table's default or rv_config_set) by a row's type and
 * range, formatting them back (rv_config_get, rv_config_enum_name), and a
 * table's defaults.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "rv_config_internal.h"

static const struct {
    const char *name;
    unsigned shift;
} size_units[] = {
    {"", 0},     {"b", 0},    {"k", 10},   {"kb", 10},  {"kib", 10},
    {"m", 20},   {"mb", 20},  {"mib", 20}, {"g", 30},   {"gb", 30},
    {"gib", 30}, {"t", 40},   {"tb", 40},  {"tib", 40}, {"p", 50},
    {"pb", 50},  {"pib", 50}, {"e", 60},   {"eb", 60},  {"eib", 60},
};

#define EXPECTED_MAX 256 /* "one of a, b, c" and the like */

void rv__config_format_size(uint64_t v, char *buf, size_t len)
{
    static const char *const units[] = {"KiB", "MiB", "GiB",
                                        "TiB", "PiB", "EiB"};

    for (int i = 5; i >= 0; i--) {
        unsigned shift = 10 * (unsigned)(i + 1);
        if (v != 0 && (v & ((UINT64_C(1) << shift) - 1)) == 0) {
            snprintf(buf, len, "%" PRIu64 "%s", v >> shift, units[i]);
            return;
        }
    }
    snprintf(buf, len, "%" PRIu64, v);
}

bool rv__config_enum_span(const rv_config_field_t *f, int index,
                          const char **name, size_t *len)
{
    const char *p = f->values;

    if (p == NULL || index < 0)
        return false;
    for (int i = 0; i < index; i++) {
        p = strchr(p, '|');
        if (p == NULL)
            return false;
        p++;
    }
    *name = p;
    *len = strcspn(p, "|");
    return true;
}

int64_t rv__config_string_max(const rv_config_field_t *f)
{
    return f->max > 0 ? f->max : RV_CONFIG_STR_MAX - 1;
}

/* What a value of row @p f must look like, for messages. */
static void expected(const rv_config_field_t *f, char *buf, size_t len)
{
    char lo[32], hi[32];
    size_t n;

    switch (f->type) {
    case RV_CFG_INT:
        snprintf(buf, len, "an integer in %" PRId64 "..%" PRId64, f->min,
                 f->max);
        break;
    case RV_CFG_SIZE:
        rv__config_format_size((uint64_t)f->min, lo, sizeof(lo));
        rv__config_format_size((uint64_t)f->max, hi, sizeof(hi));
        snprintf(buf, len, "a size in %s..%s", lo, hi);
        break;
    case RV_CFG_BOOL:
        snprintf(buf, len, "true or false (or yes/no, on/off, 1/0)");
        break;
    case RV_CFG_STRING:
        snprintf(buf, len, "a string");
        break;
    case RV_CFG_ENUM:
        n = (size_t)snprintf(buf, len, "one of ");
        for (int i = 0;; i++) {
            const char *name;
            size_t nlen;
            if (!rv__config_enum_span(f, i, &name, &nlen) || n >= len)
                break;
            n += (size_t)snprintf(buf + n, len - n, "%s%.*s", i ? ", " : "",
                                  (int)nlen, name);
        }
        break;
    }
}

static bool parse_bool(const char *s, bool *out)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};

    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *out = true;
            return true;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *out = false;
            return true;
        }
    }
    return false;
}

/*
 * Parses a size: a whole number of bytes, optionally followed (after
 * optional blanks) by a binary unit, case-insensitive. On failure writes
 * the reason to @p why.
 */
static bool parse_size(const char *s, uint64_t *out, char *why, size_t whylen)
{
    const char *unit;
    char *end;
    uint64_t v;

    if (!isdigit((unsigned char)s[0])) {
        snprintf(why, whylen,
                 "expected a size (bytes, or a number with a unit such as "
                 "4KiB, 2MiB, 1GiB), got '%s'",
                 s);
        return false;
    }
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno == ERANGE) {
        snprintf(why, whylen, "size '%s' is too large", s);
        return false;
    }
    unit = end;
    while (*unit == ' ' || *unit == '\t')
        unit++;
    for (size_t i = 0; i < sizeof(size_units) / sizeof(size_units[0]); i++) {
        unsigned shift = size_units[i].shift;
        if (strcasecmp(unit, size_units[i].name) != 0)
            continue;
        if (shift > 0 && v > (UINT64_MAX >> shift)) {
            snprintf(why, whylen, "size '%s' is too large", s);
            return false;
        }
        *out = v << shift;
        return true;
    }
    snprintf(why, whylen,
             "bad size '%s': unknown unit '%s'; expected bytes or a number "
             "with a unit " RV_CFG_SIZE_UNITS_TEXT,
             s, unit);
    return false;
}

rv_status_t rv_config_parse_size(const char *text, uint64_t *out)
{
    char why[RV_CONFIG_STR_MAX];
    if (text == NULL || out == NULL)
        return RV_ERR_INVALID;
    return parse_size(text, out, why, sizeof(why)) ? RV_OK : RV_ERR_INVALID;
}

/* The numeric types: INT, SIZE and BOOL. */
static bool parse_number(const rv_config_field_t *f, const char *text,
                         char *dst, char *why, size_t whylen)
{
    char exp[EXPECTED_MAX];
    char *end;

    if (f->type == RV_CFG_INT) {
        long long v;
        errno = 0;
        v = strtoll(text, &end, 10);
        if (end == text || *end != '\0' || isspace((unsigned char)text[0])) {
            expected(f, exp, sizeof(exp));
            snprintf(why, whylen, "expected %s, got '%s'", exp, text);
            return false;
        }
        if (errno == ERANGE || v < f->min || v > f->max) {
            expected(f, exp, sizeof(exp));
            snprintf(why, whylen, "%s is out of range; expected %s", text, exp);
            return false;
        }
        int64_t v64 = v;
        memcpy(dst, &v64, sizeof(v64));
        return true;
    }
    if (f->type == RV_CFG_SIZE) {
        uint64_t v;
        if (!parse_size(text, &v, why, whylen))
            return false;
        if (v < (uint64_t)f->min || v > (uint64_t)f->max) {
            expected(f, exp, sizeof(exp));
            snprintf(why, whylen, "%s is out of range; expected %s", text, exp);
            return false;
        }
        memcpy(dst, &v, sizeof(v));
        return true;
    }
    bool v;
    if (!parse_bool(text, &v)) {
        expected(f, exp, sizeof(exp));
        snprintf(why, whylen, "expected %s, got '%s'", exp, text);
        return false;
    }
    memcpy(dst, &v, sizeof(v));
    return true;
}

/* A STRING value of @p len bytes (within the row's bounds), checked by
 * the row's own check if it has one before it replaces the old value. */
static bool parse_string(const rv_config_field_t *f, const char *text,
                         size_t len, char *dst, char *why, size_t whylen)
{
    char value[RV_CONFIG_STR_MAX] = {0};

    memcpy(value, text, len);
    if (f->check != NULL && !f->check(value, why, whylen))
        return false;
    /* The whole array, zeros included, so that equal configurations
     * compare equal. */
    memcpy(dst, value, RV_CONFIG_STR_MAX);
    return true;
}

bool rv__config_parse(const rv_config_field_t *f, const char *text, size_t len,
                      bool is_null, void *base, char *why, size_t whylen)
{
    char *dst = (char *)base + f->offset;
    char exp[EXPECTED_MAX];

    if (memchr(text, '\0', len) != NULL) {
        snprintf(why, whylen, "the value contains a NUL character");
        return false;
    }
    if (is_null && f->type != RV_CFG_STRING) {
        expected(f, exp, sizeof(exp));
        snprintf(why, whylen, "missing value; expected %s", exp);
        return false;
    }

    switch (f->type) {
    case RV_CFG_INT:
    case RV_CFG_SIZE:
    case RV_CFG_BOOL:
        return parse_number(f, text, dst, why, whylen);
    case RV_CFG_STRING:
        if (is_null)
            len = 0;
        if ((int64_t)len > rv__config_string_max(f)) {
            snprintf(why, whylen,
                     "the value is too long (%zu bytes; at most %" PRId64 ")",
                     len, rv__config_string_max(f));
            return false;
        }
        if ((int64_t)len < f->min) {
            snprintf(why, whylen, "the value must not be empty");
            return false;
        }
        return parse_string(f, text, len, dst, why, whylen);
    case RV_CFG_ENUM:
        for (int i = 0;; i++) {
            const char *name;
            size_t nlen;
            if (!rv__config_enum_span(f, i, &name, &nlen))
                break;
            if (nlen == len && strncasecmp(name, text, len) == 0) {
                memcpy(dst, &i, sizeof(i));
                return true;
            }
        }
        expected(f, exp, sizeof(exp));
        snprintf(why, whylen, "bad value '%s'; expected %s", text, exp);
        return false;
    }
    snprintf(why, whylen, "bad table type %d", (int)f->type);
    return false;
}

rv_status_t rv__config_defaults(const rv_config_table_t *table, void *data,
                                char *why, size_t whylen)
{
    /* Zero padding and string tails, so equal configurations memcmp equal. */
    memset(data, 0, table->size);
    for (const rv_config_field_t *f = table->fields; f->name != NULL; f++) {
        char text[RV_CONFIG_STR_MAX + 1], reason[RV_CFG_MSG_MAX / 2];
        const char *def = f->def != NULL ? f->def : "";
        size_t len = strlen(def);

        /* Defaults are written as in YAML; strings are double-quoted. */
        if (f->type == RV_CFG_STRING && len >= 2 && def[0] == '"') {
            def++;
            len -= 2;
        }
        snprintf(text, sizeof(text), "%.*s", (int)len, def);
        if (!rv__config_parse(f, text, strlen(text), false, data, reason,
                              sizeof(reason))) {
            char key[RV_CFG_KEY_MAX];
            rv__config_full_key(table, f, key, sizeof(key));
            snprintf(why, whylen, "%s: bad default: %s", key, reason);
            return RV_ERR_CONFIG;
        }
    }
    return RV_OK;
}

/* ---------------------------------------------------------------------- */
/* Reading values back                                                     */
/* ---------------------------------------------------------------------- */

/*
 * The row of @p key and the struct holding its value: @p cfg's component,
 * or, for a plugin @p cfg does not hold, that table's defaults in
 * @p scratch (which the caller frees).
 */
static const rv_config_field_t *value_of(const rv_config_t *cfg,
                                         const char *key, const char **base_p,
                                         void **scratch_p)
{
    const rv_config_table_t *table;
    const rv_config_field_t *f;
    rv_config_comp_t *comp;
    char why[RV_CFG_MSG_MAX];

    *scratch_p = NULL;
    f = rv__config_find(cfg, key, &comp);
    if (f != NULL) {
        *base_p = comp->data;
        return f;
    }
    f = rv__config_find_any(key, &table);
    if (f == NULL || (*scratch_p = malloc(table->size)) == NULL)
        return NULL;
    if (rv__config_defaults(table, *scratch_p, why, sizeof(why)) != RV_OK) {
        free(*scratch_p);
        *scratch_p = NULL;
        return NULL;
    }
    *base_p = *scratch_p;
    return f;
}

/* The value at @p src of a numeric row; false for a STRING row. */
static bool read_int(const rv_config_field_t *f, const char *src,
                     int64_t *value_p)
{
    bool b;
    int e;

    switch (f->type) {
    case RV_CFG_INT:
    case RV_CFG_SIZE: /* its range stops at INT64_MAX */
        memcpy(value_p, src, sizeof(*value_p));
        return true;
    case RV_CFG_BOOL:
        memcpy(&b, src, sizeof(b));
        *value_p = b;
        return true;
    case RV_CFG_ENUM:
        memcpy(&e, src, sizeof(e));
        *value_p = e;
        return true;
    case RV_CFG_STRING:
        break;
    }
    return false;
}

rv_status_t rv_config_get(const rv_config_t *cfg, const char *key, char *buf,
                          size_t len)
{
    const rv_config_field_t *f;
    const char *base, *src, *name;
    void *scratch;
    size_t nlen;
    int64_t v;
    int n;

    if (len > 0)
        buf[0] = '\0';
    if (cfg == NULL || key == NULL ||
        (f = value_of(cfg, key, &base, &scratch)) == NULL)
        return RV_ERR_NOT_FOUND;
    src = base + f->offset;
    if (!read_int(f, src, &v))
        n = snprintf(buf, len, "%.*s", RV_CONFIG_STR_MAX - 1, src);
    else if (f->type == RV_CFG_BOOL)
        n = snprintf(buf, len, "%s", v ? "true" : "false");
    else if (f->type == RV_CFG_ENUM &&
             rv__config_enum_span(f, (int)v, &name, &nlen))
        n = snprintf(buf, len, "%.*s", (int)nlen, name);
    else if (f->type == RV_CFG_SIZE)
        n = snprintf(buf, len, "%" PRIu64, (uint64_t)v);
    else
        n = snprintf(buf, len, "%" PRId64, v);
    free(scratch);
    return n >= 0 && (size_t)n < len ? RV_OK : RV_ERR_TRUNCATED;
}

rv_status_t rv_config_get_int(const rv_config_t *cfg, const char *key,
                              int64_t *value_p)
{
    const rv_config_field_t *f;
    const char *base;
    rv_status_t status = RV_OK;
    void *scratch;
    int64_t v;

    if (cfg == NULL || key == NULL || value_p == NULL ||
        (f = value_of(cfg, key, &base, &scratch)) == NULL)
        return RV_ERR_NOT_FOUND;
    if (read_int(f, base + f->offset, &v))
        *value_p = v;
    else
        status = RV_ERR_INVALID;
    free(scratch);
    return status;
}

/* ---------------------------------------------------------------------- */
/* Enum names                                                              */
/* ---------------------------------------------------------------------- */

/*
 * Tables write enum names as "a|b|c"; rv_config_enum_name returns
 * NUL-terminated names, so each row's are split once, on first use, into a
 * copy that lives as long as the process (as the tables do).
 */
typedef struct enum_names {
    const rv_config_field_t *field;
    char *names; /* the row's values with '|' turned into NULs */
    struct enum_names *next;
} enum_names_t;

static pthread_mutex_t enum_lock = PTHREAD_MUTEX_INITIALIZER;
static enum_names_t *enum_cache;

static const char *split_names(const rv_config_field_t *f)
{
    enum_names_t *e;

    pthread_mutex_lock(&enum_lock);
    for (e = enum_cache; e != NULL; e = e->next) {
        if (e->field == f)
            break;
    }
    if (e == NULL && (e = calloc(1, sizeof(*e))) != NULL) {
        e->field = f;
        e->names = strdup(f->values);
        if (e->names == NULL) {
            free(e);
            e = NULL;
        } else {
            for (char *p = e->names; *p; p++)
                if (*p == '|')
                    *p = '\0';
            e->next = enum_cache;
            enum_cache = e;
        }
    }
    pthread_mutex_unlock(&enum_lock);
    return e != NULL ? e->names : NULL;
}

const char *rv_config_enum_name(const char *key, int value)
{
    const rv_config_table_t *table;
    const rv_config_field_t *f;
    const char *name, *names;
    size_t len;

    if (key == NULL)
        return NULL;
    f = rv__config_find_any(key, &table);
    if (f == NULL || f->type != RV_CFG_ENUM ||
        !rv__config_enum_span(f, value, &name, &len))
        return NULL;
    names = split_names(f);
    return names != NULL ? names + (name - f->values) : NULL;
}
