/*
 * The configuration loader: defaults, then a YAML file, then RIVET_*
 * environment overrides, all driven by the schema table in
 * rv_config_schema.c.
 *
 * The file is parsed by libyaml into a document (yaml_parser_load), whose
 * nodes carry the line and column every error message names. The top level
 * is a mapping of sections; nested mappings form dotted keys, so
 *
 *     transport:
 *       ucx:
 *         tls: sm,self
 *
 * sets transport.ucx.tls. Errors read like a compiler's,
 * "FILE:LINE:COL: error: KEY: what is wrong", so editors can jump to them;
 * for an environment override the location is "environment RIVET_X_Y".
 * Only the first error is reported.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <yaml.h>

#include "rv_config.h"

#define CFG_KEY_MAX 256 /* longest dotted key we look up */
#define CFG_MSG_MAX 1024

/* State of one rv_config_load call. */
typedef struct cfg_loader {
    const char *path;          /* the file, for messages */
    const unsigned char *text; /* its contents, for reader error positions */
    size_t text_len;
    char *errbuf; /* caller's buffer, or NULL to log */
    size_t errlen;
    rv_config_t *cfg; /* the configuration being filled */
} cfg_loader_t;

/* ---------------------------------------------------------------------- */
/* Error reporting                                                         */
/* ---------------------------------------------------------------------- */

/* Reports one error: into the caller's buffer when given, else to the log. */
static void cfg_report(cfg_loader_t *ld, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void cfg_report(cfg_loader_t *ld, const char *fmt, ...)
{
    char raw[CFG_MSG_MAX], msg[CFG_MSG_MAX];
    size_t n = 0;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(raw, sizeof(raw), fmt, ap);
    va_end(ap);

    /* One line, whatever the keys and values quoted in it contain. */
    for (const unsigned char *p = (const unsigned char *)raw;
         *p != '\0' && n + 5 < sizeof(msg); p++) {
        if (*p == '\n')
            n += (size_t)snprintf(msg + n, sizeof(msg) - n, "\\n");
        else if (*p == '\t')
            n += (size_t)snprintf(msg + n, sizeof(msg) - n, "\\t");
        else if (*p < 0x20 || *p == 0x7f)
            n += (size_t)snprintf(msg + n, sizeof(msg) - n, "\\x%02x", *p);
        else
            msg[n++] = (char)*p;
    }
    msg[n] = '\0';

    if (ld->errbuf != NULL && ld->errlen > 0)
        snprintf(ld->errbuf, ld->errlen, "%s", msg);
    else if (ld->errbuf == NULL)
        rv_error("%s", msg);
}

/* Reports an error at a node of the file: "FILE:LINE:COL: error: ...". */
static rv_status_t cfg_error_at(cfg_loader_t *ld, yaml_mark_t mark,
                                const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static rv_status_t cfg_error_at(cfg_loader_t *ld, yaml_mark_t mark,
                                const char *fmt, ...)
{
    char what[CFG_MSG_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    cfg_report(ld, "%s:%zu:%zu: error: %s", ld->path, mark.line + 1,
               mark.column + 1, what);
    return RV_ERR_CONFIG;
}

/* ---------------------------------------------------------------------- */
/* Schema lookups                                                          */
/* ---------------------------------------------------------------------- */

static const rv_config_field_t *cfg_find_key(const char *key)
{
    for (const rv_config_field_t *f = rv_config_schema; f->key != NULL; f++) {
        if (strcmp(f->key, key) == 0)
            return f;
    }
    return NULL;
}

/* True if @p prefix names a section: some key starts with "prefix.". */
static bool cfg_is_section(const char *prefix)
{
    size_t len = strlen(prefix);

    for (const rv_config_field_t *f = rv_config_schema; f->key != NULL; f++) {
        if (strncmp(f->key, prefix, len) == 0 && f->key[len] == '.')
            return true;
    }
    return false;
}

/* True if @p prefix is a section holding at least one supported key. */
static bool cfg_section_supported(const char *prefix, size_t len)
{
    for (const rv_config_field_t *f = rv_config_schema; f->key != NULL; f++) {
        if (strncmp(f->key, prefix, len) == 0 && f->later == NULL)
            return true;
    }
    return false;
}

/* "transport.ucx.tls" -> "RIVET_TRANSPORT_UCX_TLS" */
static void cfg_env_name(const char *key, char *buf, size_t len)
{
    size_t n = (size_t)snprintf(buf, len, "RIVET_");

    for (const char *p = key; *p != '\0' && n + 1 < len; p++)
        buf[n++] = (*p == '.') ? '_' : (char)toupper((unsigned char)*p);
    buf[n < len ? n : len - 1] = '\0';
}

static const char *cfg_last_component(const char *key)
{
    const char *dot = strrchr(key, '.');
    return dot != NULL ? dot + 1 : key;
}

/*
 * The @p index-th name of an ENUM row's values ("a|b|c"), as a pointer into
 * the values string and a length. Returns false past the last name.
 */
static bool cfg_enum_span(const rv_config_field_t *f, int index,
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

/* ---------------------------------------------------------------------- */
/* Values                                                                  */
/* ---------------------------------------------------------------------- */

static const struct {
    const char *name;
    unsigned shift;
} cfg_size_units[] = {
    {"", 0},     {"b", 0},    {"k", 10},   {"kb", 10},  {"kib", 10},
    {"m", 20},   {"mb", 20},  {"mib", 20}, {"g", 30},   {"gb", 30},
    {"gib", 30}, {"t", 40},   {"tb", 40},  {"tib", 40}, {"p", 50},
    {"pb", 50},  {"pib", 50}, {"e", 60},   {"eb", 60},  {"eib", 60},
};

#define CFG_SIZE_UNITS_TEXT                                                    \
    "K, KB, KiB, M, MB, MiB, G, GB, GiB, T, TB, TiB (binary multiples)"

/* Writes @p v in the largest binary unit that divides it: 4096 -> "4KiB". */
static void cfg_format_size(uint64_t v, char *buf, size_t len)
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

/* What a value of row @p f must look like, for messages. */
static void cfg_expected(const rv_config_field_t *f, char *buf, size_t len)
{
    char lo[32], hi[32];
    size_t n;

    switch (f->type) {
    case RV_CFG_INT:
        snprintf(buf, len, "an integer in %" PRId64 "..%" PRId64, f->min,
                 f->max);
        break;
    case RV_CFG_SIZE:
        cfg_format_size((uint64_t)f->min, lo, sizeof(lo));
        cfg_format_size((uint64_t)f->max, hi, sizeof(hi));
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
            if (!cfg_enum_span(f, i, &name, &nlen) || n >= len)
                break;
            n += (size_t)snprintf(buf + n, len - n, "%s%.*s", i ? ", " : "",
                                  (int)nlen, name);
        }
        break;
    }
}

static int64_t cfg_string_max(const rv_config_field_t *f)
{
    return f->max > 0 ? f->max : RV_CONFIG_STR_MAX - 1;
}

static bool cfg_parse_bool(const char *s, bool *out)
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
static bool cfg_parse_size(const char *s, uint64_t *out, char *why,
                           size_t whylen)
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
    for (size_t i = 0; i < sizeof(cfg_size_units) / sizeof(cfg_size_units[0]);
         i++) {
        unsigned shift = cfg_size_units[i].shift;
        if (strcasecmp(unit, cfg_size_units[i].name) != 0)
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
             "with a unit " CFG_SIZE_UNITS_TEXT,
             s, unit);
    return false;
}

/*
 * Parses @p text (@p len bytes; @p is_null for a YAML null such as an empty
 * value or ~) as the value of row @p f and stores it into @p cfg. On failure
 * writes the reason, without the key, to @p why.
 */
static bool cfg_set_value(const rv_config_field_t *f, const char *text,
                          size_t len, bool is_null, rv_config_t *cfg, char *why,
                          size_t whylen)
{
    char *dst = (char *)cfg + f->offset;
    char expected[256];
    char *end;

    if (memchr(text, '\0', len) != NULL) {
        snprintf(why, whylen, "the value contains a NUL character");
        return false;
    }
    if (is_null && f->type != RV_CFG_STRING) {
        cfg_expected(f, expected, sizeof(expected));
        snprintf(why, whylen, "missing value; expected %s", expected);
        return false;
    }

    switch (f->type) {
    case RV_CFG_INT: {
        long long v;
        errno = 0;
        v = strtoll(text, &end, 10);
        if (end == text || *end != '\0' || isspace((unsigned char)text[0])) {
            cfg_expected(f, expected, sizeof(expected));
            snprintf(why, whylen, "expected %s, got '%s'", expected, text);
            return false;
        }
        if (errno == ERANGE || v < f->min || v > f->max) {
            cfg_expected(f, expected, sizeof(expected));
            snprintf(why, whylen, "%s is out of range; expected %s", text,
                     expected);
            return false;
        }
        int64_t v64 = v;
        memcpy(dst, &v64, sizeof(v64));
        return true;
    }
    case RV_CFG_SIZE: {
        uint64_t v;
        if (!cfg_parse_size(text, &v, why, whylen))
            return false;
        if (v < (uint64_t)f->min || v > (uint64_t)f->max) {
            cfg_expected(f, expected, sizeof(expected));
            snprintf(why, whylen, "%s is out of range; expected %s", text,
                     expected);
            return false;
        }
        memcpy(dst, &v, sizeof(v));
        return true;
    }
    case RV_CFG_BOOL: {
        bool v;
        if (!cfg_parse_bool(text, &v)) {
            cfg_expected(f, expected, sizeof(expected));
            snprintf(why, whylen, "expected %s, got '%s'", expected, text);
            return false;
        }
        memcpy(dst, &v, sizeof(v));
        return true;
    }
    case RV_CFG_STRING: {
        if (is_null)
            len = 0;
        if ((int64_t)len > cfg_string_max(f)) {
            snprintf(why, whylen,
                     "the value is too long (%zu bytes; at "
                     "most %" PRId64 ")",
                     len, cfg_string_max(f));
            return false;
        }
        if ((int64_t)len < f->min) {
            snprintf(why, whylen, "the value must not be empty");
            return false;
        }
        /* Zero the whole array so equal configurations compare equal. */
        memset(dst, 0, RV_CONFIG_STR_MAX);
        memcpy(dst, text, len);
        return true;
    }
    case RV_CFG_ENUM:
        for (int i = 0;; i++) {
            const char *name;
            size_t nlen;
            if (!cfg_enum_span(f, i, &name, &nlen))
                break;
            if (nlen == len && strncasecmp(name, text, len) == 0) {
                memcpy(dst, &i, sizeof(i));
                return true;
            }
        }
        cfg_expected(f, expected, sizeof(expected));
        snprintf(why, whylen, "bad value '%s'; expected %s", text, expected);
        return false;
    }
    snprintf(why, whylen, "bad schema type %d", (int)f->type);
    return false;
}

/* ---------------------------------------------------------------------- */
/* Suggestions                                                             */
/* ---------------------------------------------------------------------- */

/* Levenshtein distance; strings longer than CFG_KEY_MAX count as far. */
static size_t cfg_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    size_t row[CFG_KEY_MAX + 1];

    if (la > CFG_KEY_MAX || lb > CFG_KEY_MAX)
        return SIZE_MAX / 2;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* How many edits a name of @p len characters may be from a suggestion. */
static size_t cfg_distance_limit(size_t len)
{
    return len <= 4 ? 1 : len <= 8 ? 2 : 3;
}

typedef struct cfg_suggestion {
    char name[CFG_KEY_MAX + 1];
    size_t score, full; /* best of both distances; full-path distance */
} cfg_suggestion_t;

/* Considers candidate @p cand (a key or section) as a suggestion for @p key. */
static void cfg_consider(cfg_suggestion_t *s, const char *key, const char *cand)
{
    size_t full = cfg_distance(key, cand);
    size_t last =
        cfg_distance(cfg_last_component(key), cfg_last_component(cand));
    size_t score = full < last ? full : last;

    if (full > cfg_distance_limit(strlen(key)) &&
        last > cfg_distance_limit(strlen(cfg_last_component(key))))
        return;
    if (score < s->score || (score == s->score && full < s->full)) {
        snprintf(s->name, sizeof(s->name), "%s", cand);
        s->score = score;
        s->full = full;
    }
}

/*
 * Finds the valid key (@p sections false) or section (@p sections true)
 * nearest to @p key, comparing both the full dotted paths and their last
 * components, so "transport.tls" finds "transport.ucx.tls".
 */
static bool cfg_suggest(const char *key, bool sections, cfg_suggestion_t *s)
{
    s->name[0] = '\0';
    s->score = s->full = SIZE_MAX;
    for (const rv_config_field_t *f = rv_config_schema; f->key != NULL; f++) {
        if (!sections) {
            cfg_consider(s, key, f->key);
            continue;
        }
        /* Every proper prefix ending before a dot is a section. */
        for (const char *dot = strchr(f->key, '.'); dot != NULL;
             dot = strchr(dot + 1, '.')) {
            size_t len = (size_t)(dot - f->key);
            char section[CFG_KEY_MAX + 1];
            if (len > CFG_KEY_MAX)
                break;
            memcpy(section, f->key, len);
            section[len] = '\0';
            cfg_consider(s, key, section);
        }
    }
    return s->name[0] != '\0';
}

/* ---------------------------------------------------------------------- */
/* The file                                                                */
/* ---------------------------------------------------------------------- */

static const char *cfg_node_kind(const yaml_node_t *node)
{
    switch (node->type) {
    case YAML_MAPPING_NODE:
        return "a mapping";
    case YAML_SEQUENCE_NODE:
        return "a sequence";
    default:
        return "a scalar";
    }
}

/* True for a YAML null written plainly: an empty value, ~ or null. */
static bool cfg_node_is_null(const yaml_node_t *node)
{
    const char *v = (const char *)node->data.scalar.value;

    if (node->type != YAML_SCALAR_NODE ||
        node->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return false;
    return v[0] == '\0' || strcmp(v, "~") == 0 || strcmp(v, "null") == 0 ||
           strcmp(v, "Null") == 0 || strcmp(v, "NULL") == 0;
}

static rv_status_t cfg_unknown(cfg_loader_t *ld, const char *key,
                               const yaml_node_t *knode,
                               const yaml_node_t *vnode)
{
    bool want_section = vnode->type == YAML_MAPPING_NODE;
    const char *what = want_section ? "section" : "key";
    cfg_suggestion_t s;

    /* Prefer the kind the value suggests, then the other one. */
    if (cfg_suggest(key, want_section, &s) ||
        cfg_suggest(key, !want_section, &s))
        return cfg_error_at(ld, knode->start_mark,
                            "unknown %s '%s'; did you mean '%s'?", what, key,
                            s.name);
    return cfg_error_at(ld, knode->start_mark,
                        "unknown %s '%s' (rivet-config --reference lists "
                        "every key)",
                        what, key);
}

static rv_status_t cfg_load_mapping(cfg_loader_t *ld, yaml_document_t *doc,
                                    yaml_node_t *map, const char *prefix);

/* Handles one key: value pair of a mapping whose dotted path is @p prefix. */
static rv_status_t cfg_load_pair(cfg_loader_t *ld, yaml_document_t *doc,
                                 yaml_node_pair_t *pair, yaml_node_t *map,
                                 const char *prefix)
{
    yaml_node_t *knode = yaml_document_get_node(doc, pair->key);
    yaml_node_t *vnode = yaml_document_get_node(doc, pair->value);
    const rv_config_field_t *f;
    char key[CFG_KEY_MAX + 1];
    const char *name;

    if (knode->type != YAML_SCALAR_NODE)
        return cfg_error_at(ld, knode->start_mark,
                            "%s%sexpected a name as key, got %s", prefix,
                            *prefix ? ": " : "", cfg_node_kind(knode));
    name = (const char *)knode->data.scalar.value;
    if (snprintf(key, sizeof(key), "%s%s%s", prefix, *prefix ? "." : "",
                 name) >= (int)sizeof(key))
        return cfg_error_at(ld, knode->start_mark, "unknown key '%s%s%s'",
                            prefix, *prefix ? "." : "", name);
    if (strchr(name, '.') != NULL)
        return cfg_error_at(ld, knode->start_mark,
                            "%s: dotted keys are not accepted; write each "
                            "part as a nested mapping",
                            key);

    /* libyaml keeps duplicate keys; a later one would silently win. */
    for (yaml_node_pair_t *q = map->data.mapping.pairs.start; q < pair; q++) {
        yaml_node_t *qk = yaml_document_get_node(doc, q->key);
        if (qk->type == YAML_SCALAR_NODE &&
            strcmp((const char *)qk->data.scalar.value, name) == 0)
            return cfg_error_at(ld, knode->start_mark,
                                "%s: duplicate key (first given at line %zu, "
                                "column %zu)",
                                key, qk->start_mark.line + 1,
                                qk->start_mark.column + 1);
    }

    f = cfg_find_key(key);
    if (f != NULL) {
        char why[CFG_MSG_MAX / 2];
        if (f->later != NULL)
            return cfg_error_at(ld, knode->start_mark,
                                "%s: not supported yet (%s)", key, f->later);
        if (vnode->type != YAML_SCALAR_NODE)
            return cfg_error_at(ld, vnode->start_mark,
                                "%s: expected a single value, got %s", key,
                                cfg_node_kind(vnode));
        if (!cfg_set_value(f, (const char *)vnode->data.scalar.value,
                           vnode->data.scalar.length, cfg_node_is_null(vnode),
                           ld->cfg, why, sizeof(why)))
            return cfg_error_at(ld, vnode->start_mark, "%s: %s", key, why);
        return RV_OK;
    }

    if (cfg_is_section(key)) {
        if (vnode->type == YAML_MAPPING_NODE)
            return cfg_load_mapping(ld, doc, vnode, key);
        if (cfg_node_is_null(vnode))
            return RV_OK; /* "section:" with nothing under it */
        return cfg_error_at(ld, vnode->start_mark,
                            "%s: expected a mapping (the section's keys), got "
                            "%s",
                            key, cfg_node_kind(vnode));
    }
    return cfg_unknown(ld, key, knode, vnode);
}

static rv_status_t cfg_load_mapping(cfg_loader_t *ld, yaml_document_t *doc,
                                    yaml_node_t *map, const char *prefix)
{
    for (yaml_node_pair_t *pair = map->data.mapping.pairs.start;
         pair < map->data.mapping.pairs.top; pair++) {
        rv_status_t status = cfg_load_pair(ld, doc, pair, map, prefix);
        if (status != RV_OK)
            return status;
    }
    return RV_OK;
}

/* Reports a libyaml error with its problem text and position. */
static rv_status_t cfg_yaml_error(cfg_loader_t *ld, const yaml_parser_t *p)
{
    yaml_mark_t mark = p->problem_mark;

    if (p->error == YAML_MEMORY_ERROR) {
        cfg_report(ld, "%s: error: out of memory while parsing", ld->path);
        return RV_ERR_NO_MEMORY;
    }
    if (p->error == YAML_READER_ERROR) {
        /* Reader errors carry a byte offset instead of a mark. */
        memset(&mark, 0, sizeof(mark));
        for (size_t i = 0; i < p->problem_offset && i < ld->text_len; i++) {
            if (ld->text[i] == '\n') {
                mark.line++;
                mark.column = 0;
            } else if ((ld->text[i] & 0xc0) != 0x80) {
                mark.column++;
            }
        }
        return cfg_error_at(ld, mark, "invalid YAML: %s",
                            p->problem ? p->problem : "unreadable input");
    }
    if (p->context != NULL)
        return cfg_error_at(ld, mark,
                            "invalid YAML: %s (%s at line %zu, "
                            "column %zu)",
                            p->problem ? p->problem : "syntax error",
                            p->context, p->context_mark.line + 1,
                            p->context_mark.column + 1);
    return cfg_error_at(ld, mark, "invalid YAML: %s",
                        p->problem ? p->problem : "syntax error");
}

/* Reads all of @p path into a NUL-terminated buffer the caller frees. */
static rv_status_t cfg_read_file(cfg_loader_t *ld, unsigned char **text_p,
                                 size_t *len_p)
{
    unsigned char *text = NULL;
    size_t len = 0, cap = 0;
    rv_status_t status;
    FILE *fp;

    fp = fopen(ld->path, "rb");
    if (fp == NULL) {
        int err = errno;
        cfg_report(ld, "cannot open %s: %s", ld->path, strerror(err));
        return err == ENOENT ? RV_ERR_NOT_FOUND : RV_ERR_IO;
    }
    for (;;) {
        if (cap - len < 4096) {
            unsigned char *bigger = realloc(text, cap ? 2 * cap : 8192);
            if (bigger == NULL) {
                cfg_report(ld, "cannot read %s: out of memory", ld->path);
                status = RV_ERR_NO_MEMORY;
                goto err_free;
            }
            text = bigger;
            cap = cap ? 2 * cap : 8192;
        }
        size_t n = fread(text + len, 1, cap - len - 1, fp);
        len += n;
        if (n == 0)
            break;
    }
    if (ferror(fp)) {
        cfg_report(ld, "cannot read %s: %s", ld->path, strerror(errno));
        status = RV_ERR_IO;
        goto err_free;
    }
    fclose(fp);
    text[len] = '\0';
    *text_p = text;
    *len_p = len;
    return RV_OK;

err_free:
    free(text);
    fclose(fp);
    return status;
}

static rv_status_t cfg_load_file(cfg_loader_t *ld)
{
    yaml_parser_t parser;
    yaml_document_t doc, extra;
    unsigned char *text;
    yaml_node_t *root;
    rv_status_t status;

    status = cfg_read_file(ld, &text, &ld->text_len);
    if (status != RV_OK)
        return status;
    ld->text = text;

    if (!yaml_parser_initialize(&parser)) {
        cfg_report(ld, "%s: error: out of memory while parsing", ld->path);
        status = RV_ERR_NO_MEMORY;
        goto err_free_text;
    }
    yaml_parser_set_input_string(&parser, text, ld->text_len);
    if (!yaml_parser_load(&parser, &doc)) {
        status = cfg_yaml_error(ld, &parser);
        goto err_parser;
    }

    root = yaml_document_get_root_node(&doc);
    if (root == NULL) {
        status = RV_OK; /* an empty file: defaults */
    } else if (root->type != YAML_MAPPING_NODE && !cfg_node_is_null(root)) {
        status = cfg_error_at(ld, root->start_mark,
                              "expected a mapping of sections (job:, "
                              "transport:, ...) at the top level, got %s",
                              cfg_node_kind(root));
    } else if (root->type == YAML_MAPPING_NODE) {
        status = cfg_load_mapping(ld, &doc, root, "");
    }
    if (status != RV_OK)
        goto err_doc;

    /* A second document would be ignored silently; refuse it. */
    if (!yaml_parser_load(&parser, &extra)) {
        status = cfg_yaml_error(ld, &parser);
        goto err_doc;
    }
    root = yaml_document_get_root_node(&extra);
    if (root != NULL)
        status = cfg_error_at(ld, root->start_mark,
                              "a second YAML document; a configuration is "
                              "one document");
    yaml_document_delete(&extra);

err_doc:
    yaml_document_delete(&doc);
err_parser:
    yaml_parser_delete(&parser);
err_free_text:
    free(text);
    ld->text = NULL;
    return status;
}

/* ---------------------------------------------------------------------- */
/* Defaults and environment                                                */
/* ---------------------------------------------------------------------- */

static rv_status_t cfg_load_defaults(cfg_loader_t *ld)
{
    for (const rv_config_field_t *f = rv_config_schema; f->key != NULL; f++) {
        char why[CFG_MSG_MAX / 2];
        const char *def = f->def;
        size_t len = strlen(def);

        /* Defaults are written as in YAML; strings are double-quoted. */
        if (f->type == RV_CFG_STRING && len >= 2 && def[0] == '"') {
            def++;
            len -= 2;
        }
        char text[RV_CONFIG_STR_MAX + 1];
        snprintf(text, sizeof(text), "%.*s", (int)len, def);
        if (!cfg_set_value(f, text, strlen(text), false, ld->cfg, why,
                           sizeof(why))) {
            cfg_report(ld, "schema: error: %s: bad default: %s", f->key, why);
            return RV_ERR_CONFIG;
        }
    }
    return RV_OK;
}

static rv_status_t cfg_load_env(cfg_loader_t *ld)
{
    for (const rv_config_field_t *f = rv_config_schema; f->key != NULL; f++) {
        char name[CFG_KEY_MAX + 8], why[CFG_MSG_MAX / 2];
        const char *value;

        cfg_env_name(f->key, name, sizeof(name));
        value = getenv(name);
        if (value == NULL)
            continue;
        if (f->later != NULL) {
            cfg_report(ld, "environment %s: error: %s: not supported yet (%s)",
                       name, f->key, f->later);
            return RV_ERR_CONFIG;
        }
        if (!cfg_set_value(f, value, strlen(value), false, ld->cfg, why,
                           sizeof(why))) {
            cfg_report(ld, "environment %s: error: %s: %s", name, f->key, why);
            return RV_ERR_CONFIG;
        }
    }
    return RV_OK;
}

rv_status_t rv_config_load(const char *path, rv_config_t *cfg, char *errbuf,
                           size_t errlen)
{
    rv_config_t tmp;
    cfg_loader_t ld = {
        .path = path,
        .errbuf = errbuf,
        .errlen = errlen,
        .cfg = &tmp,
    };
    rv_status_t status;

    /* Zero padding and string tails, so equal configurations memcmp equal. */
    memset(&tmp, 0, sizeof(tmp));
    status = cfg_load_defaults(&ld);
    if (status == RV_OK && path != NULL)
        status = cfg_load_file(&ld);
    if (status == RV_OK)
        status = cfg_load_env(&ld);
    if (status != RV_OK)
        return status;
    *cfg = tmp;
    return RV_OK;
}

/* ---------------------------------------------------------------------- */
/* Dump and reference                                                      */
/* ---------------------------------------------------------------------- */

/* Writes @p s as a YAML double-quoted scalar. */
static void cfg_write_quoted(const char *s, FILE *out)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"':
            fputs("\\\"", out);
            break;
        case '\\':
            fputs("\\\\", out);
            break;
        case '\n':
            fputs("\\n", out);
            break;
        case '\t':
            fputs("\\t", out);
            break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                fprintf(out, "\\x%02x", *p);
            else
                fputc(*p, out);
        }
    }
    fputc('"', out);
}

/* Writes the value of row @p f in @p cfg as YAML. */
static void cfg_write_value(const rv_config_field_t *f, const rv_config_t *cfg,
                            FILE *out)
{
    const char *src = (const char *)cfg + f->offset;
    char buf[64];

    switch (f->type) {
    case RV_CFG_INT: {
        int64_t v;
        memcpy(&v, src, sizeof(v));
        fprintf(out, "%" PRId64, v);
        break;
    }
    case RV_CFG_SIZE: {
        uint64_t v;
        memcpy(&v, src, sizeof(v));
        cfg_format_size(v, buf, sizeof(buf));
        fputs(buf, out);
        break;
    }
    case RV_CFG_BOOL: {
        bool v;
        memcpy(&v, src, sizeof(v));
        fputs(v ? "true" : "false", out);
        break;
    }
    case RV_CFG_STRING: {
        char s[RV_CONFIG_STR_MAX + 1];
        memcpy(s, src, RV_CONFIG_STR_MAX);
        s[RV_CONFIG_STR_MAX] = '\0';
        cfg_write_quoted(s, out);
        break;
    }
    case RV_CFG_ENUM: {
        const char *name;
        size_t len;
        int v;
        memcpy(&v, src, sizeof(v));
        if (cfg_enum_span(f, v, &name, &len))
            fprintf(out, "%.*s", (int)len, name);
        else
            fprintf(out, "%d", v); /* not a valid value: reload will say so */
        break;
    }
    }
}

/*
 * Writes the rows under @p prefix (length @p plen, "" or "section.") at
 * @p depth, subsections nested in schema order. Sections without a
 * supported key are not opened: their keys become comments only.
 */
static void cfg_dump_section(const rv_config_t *cfg, FILE *out,
                             const char *prefix, size_t plen, int depth)
{
    for (const rv_config_field_t *f = rv_config_schema; f->key != NULL; f++) {
        const char *rest;
        bool seen = false;
        size_t clen;

        if (strncmp(f->key, prefix, plen) != 0)
            continue;
        rest = f->key + plen;
        clen = strcspn(rest, ".");
        if (rest[clen] == '\0') { /* a key of this section */
            if (f->later == NULL) {
                fprintf(out, "%*s%s: ", 2 * depth, "", rest);
                cfg_write_value(f, cfg, out);
            } else {
                fprintf(out, "%*s# %s: ", 2 * depth, "", f->key);
                cfg_write_value(f, cfg, out);
                fprintf(out, "  (not supported yet: %s)", f->later);
            }
            fputc('\n', out);
            continue;
        }

        /* A subsection: written once, where its first key appears. */
        for (const rv_config_field_t *g = rv_config_schema; g < f; g++) {
            if (strncmp(g->key, f->key, plen + clen + 1) == 0) {
                seen = true;
                break;
            }
        }
        if (seen)
            continue;
        if (cfg_section_supported(f->key, plen + clen + 1)) {
            fprintf(out, "%*s%.*s:\n", 2 * depth, "", (int)clen, rest);
            cfg_dump_section(cfg, out, f->key, plen + clen + 1, depth + 1);
        } else {
            cfg_dump_section(cfg, out, f->key, plen + clen + 1, depth);
        }
    }
}

void rv_config_dump(const rv_config_t *cfg, FILE *out)
{
    fprintf(out, "# rivet configuration (keys not supported yet are shown "
                 "as comments)\n");
    cfg_dump_section(cfg, out, "", 0, 0);
}

/* Writes @p s into a Markdown table cell, escaping the column separator. */
static void cfg_write_cell(const char *s, FILE *out)
{
    for (; *s; s++) {
        if (*s == '|')
            fputc('\\', out);
        fputc(*s, out);
    }
}

void rv_config_print_reference(FILE *out)
{
    static const char *const type_names[] = {
        [RV_CFG_INT] = "integer",  [RV_CFG_SIZE] = "size",
        [RV_CFG_BOOL] = "boolean", [RV_CFG_STRING] = "string",
        [RV_CFG_ENUM] = "enum",
    };

    fprintf(out, "| key | type | default | range / values | environment "
                 "variable | description |\n");
    fprintf(out, "|---|---|---|---|---|---|\n");
    for (const rv_config_field_t *f = rv_config_schema; f->key != NULL; f++) {
        char env[CFG_KEY_MAX + 8], lo[32], hi[32];

        cfg_env_name(f->key, env, sizeof(env));
        fprintf(out, "| `%s` | %s | `%s` | ", f->key, type_names[f->type],
                f->def);
        switch (f->type) {
        case RV_CFG_INT:
            fprintf(out, "%" PRId64 "..%" PRId64, f->min, f->max);
            break;
        case RV_CFG_SIZE:
            cfg_format_size((uint64_t)f->min, lo, sizeof(lo));
            cfg_format_size((uint64_t)f->max, hi, sizeof(hi));
            fprintf(out, "%s..%s", lo, hi);
            break;
        case RV_CFG_BOOL:
            fprintf(out, "true, false");
            break;
        case RV_CFG_STRING:
            if (f->min > 0)
                fprintf(out, "%" PRId64 "..%" PRId64 " bytes", f->min,
                        cfg_string_max(f));
            else
                fprintf(out, "up to %" PRId64 " bytes", cfg_string_max(f));
            break;
        case RV_CFG_ENUM:
            for (int i = 0;; i++) {
                const char *name;
                size_t len;
                if (!cfg_enum_span(f, i, &name, &len))
                    break;
                fprintf(out, "%s`%.*s`", i ? ", " : "", (int)len, name);
            }
            break;
        }
        fprintf(out, " | `%s` | ", env);
        if (f->later != NULL) {
            fprintf(out, "*Not supported yet (");
            cfg_write_cell(f->later, out);
            fprintf(out, ").* ");
        }
        cfg_write_cell(f->help, out);
        fprintf(out, " |\n");
    }
    fprintf(
        out,
        "\nSizes take a whole number of bytes or a unit: " CFG_SIZE_UNITS_TEXT
        ", case-insensitive.\n"
        "Environment variables override the file.\n");
}

/* ---------------------------------------------------------------------- */
/* Enum names                                                              */
/* ---------------------------------------------------------------------- */

/*
 * The schema writes enum names as "a|b|c"; rv_config_enum_name returns
 * NUL-terminated names, so they are split once into a table that lives as
 * long as the process.
 */
static pthread_once_t cfg_enum_once = PTHREAD_ONCE_INIT;
static char **cfg_enum_names; /* per row: names, NULL-terminated, or NULL */

static void cfg_enum_init(void)
{
    size_t rows = 0;
    char **table;

    while (rv_config_schema[rows].key != NULL)
        rows++;
    table = calloc(rows, sizeof(*table));
    if (table == NULL)
        return;
    for (size_t i = 0; i < rows; i++) {
        const char *values = rv_config_schema[i].values;
        if (rv_config_schema[i].type != RV_CFG_ENUM || values == NULL)
            continue;
        table[i] = strdup(values);
        if (table[i] == NULL)
            continue;
        for (char *p = table[i]; *p; p++) {
            if (*p == '|')
                *p = '\0';
        }
    }
    cfg_enum_names = table;
}

const char *rv_config_enum_name(const char *key, int value)
{
    const rv_config_field_t *f = cfg_find_key(key);
    const char *name;
    size_t len, row;

    if (f == NULL || f->type != RV_CFG_ENUM ||
        !cfg_enum_span(f, value, &name, &len))
        return NULL;
    pthread_once(&cfg_enum_once, cfg_enum_init);
    row = (size_t)(f - rv_config_schema);
    if (cfg_enum_names == NULL || cfg_enum_names[row] == NULL)
        return NULL;
    return cfg_enum_names[row] + (name - f->values);
}
