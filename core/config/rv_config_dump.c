/*
 * `rivet-config --dump` and `--reference`: every key of every component,
 * the plugins in the plugin path included, in one order: core's sections,
 * each with the plugins' sections nested where they belong (transport.ucx
 * inside transport), then the layers' by prefix.
 *
 * The dump is YAML that rv_config_load reads back unchanged; a plugin the
 * configuration does not hold is written at its defaults, which is what
 * its keys are.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "rv_config_internal.h"

/* One key to write: its full name, row and table, and where its value is. */
typedef struct row {
    char key[RV_CFG_KEY_MAX];
    const rv_config_field_t *f;
    const rv_config_table_t *t;
    const void *base; /* the component's struct (dump only) */
} row_t;

/* What the walk over the rows writes, and where. */
typedef struct walk {
    row_t *rows;
    size_t nrows;
    const rv_config_table_t *tables[RV_CFG_MAX_TABLES];
    size_t ntables;
    void **scratch; /* per table: defaults not held by the configuration */
    FILE *out;
    bool reference; /* a Markdown table rather than YAML */
} walk_t;

static int table_cmp(const void *a, const void *b)
{
    return rv__config_table_cmp(*(const rv_config_table_t *const *)a,
                                *(const rv_config_table_t *const *)b);
}

/*
 * Collects every table (those of @p cfg's components too, if not NULL) and
 * their rows, in order; for a dump, each row's value comes from @p cfg or
 * from its table's defaults.
 */
static rv_status_t walk_init(walk_t *w, const rv_config_t *cfg)
{
    const rv_config_table_t **tables = w->tables;
    char why[RV_CFG_MSG_MAX];
    size_t n = rv__config_tables(tables, true), nrows = 0;

    for (size_t i = 0; cfg != NULL && i < cfg->ncomps; i++) {
        size_t j = 0;
        while (j < n && tables[j] != cfg->comps[i].table)
            j++;
        if (j == n && n < RV_CFG_MAX_TABLES)
            tables[n++] = cfg->comps[i].table;
    }
    qsort(tables, n, sizeof(tables[0]), table_cmp);
    for (size_t i = 0; i < n; i++)
        for (const rv_config_field_t *f = tables[i]->fields; f->name; f++)
            nrows++;

    w->ntables = n;
    w->rows = calloc(nrows ? nrows : 1, sizeof(*w->rows));
    w->scratch = calloc(n, sizeof(*w->scratch));
    if (w->rows == NULL || w->scratch == NULL)
        return RV_ERR_NO_MEMORY;
    for (size_t i = 0; i < n; i++) {
        const rv_config_table_t *t = tables[i];
        const void *base = NULL;
        if (cfg != NULL && rv__config_comp(cfg, t->prefix) != NULL) {
            base = rv__config_comp(cfg, t->prefix)->data;
        } else if (cfg != NULL) {
            w->scratch[i] = malloc(t->size > 0 ? t->size : 1);
            if (w->scratch[i] == NULL ||
                rv__config_defaults(t, w->scratch[i], why, sizeof(why)) !=
                    RV_OK)
                return RV_ERR_NO_MEMORY;
            base = w->scratch[i];
        }
        for (const rv_config_field_t *f = t->fields; f->name; f++) {
            row_t *r = &w->rows[w->nrows++];
            rv__config_full_key(t, f, r->key, sizeof(r->key));
            r->f = f;
            r->t = t;
            r->base = base;
        }
    }
    return RV_OK;
}

static void walk_fini(walk_t *w)
{
    for (size_t i = 0; w->scratch != NULL && i < w->ntables; i++)
        free(w->scratch[i]);
    free(w->scratch);
    free(w->rows);
}

/* ---------------------------------------------------------------------- */
/* YAML                                                                    */
/* ---------------------------------------------------------------------- */

/* Writes @p s as a YAML double-quoted scalar. */
static void write_quoted(const char *s, FILE *out)
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
            if (*p < 0x20 || *p == 0x7f) {
                fprintf(out, "\\x%02x", *p);
            } else if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) {
                /* U+0080..U+009F: libyaml refuses them raw, and reads
                 * U+0085 (NEL) as a line break, folded to a space. */
                fprintf(out, "\\x%02x", *++p);
            } else if (p[0] == 0xe2 && p[1] == 0x80 &&
                       (p[2] == 0xa8 || p[2] == 0xa9)) {
                /* U+2028 and U+2029 are line breaks too. */
                fputs(p[2] == 0xa8 ? "\\L" : "\\P", out);
                p += 2;
            } else if (p[0] == 0xef &&
                       ((p[1] == 0xbb && p[2] == 0xbf) ||
                        (p[1] == 0xbf && (p[2] == 0xbe || p[2] == 0xbf)))) {
                /* U+FEFF, U+FFFE and U+FFFF: libyaml refuses them raw
                 * inside a document. */
                fprintf(out, "\\u%02X%02X", p[1] == 0xbb ? 0xfe : 0xff,
                        p[1] == 0xbb ? 0xff : (p[2] == 0xbe ? 0xfe : 0xff));
                p += 2;
            } else {
                fputc(*p, out);
            }
        }
    }
    fputc('"', out);
}

/* Writes the value of @p r as YAML. */
static void write_value(const row_t *r, FILE *out)
{
    const char *src = (const char *)r->base + r->f->offset;
    char buf[RV_CONFIG_STR_MAX + 1];
    const char *name;
    size_t len;
    int64_t i;
    uint64_t u;
    bool b;
    int e;

    switch (r->f->type) {
    case RV_CFG_INT:
        memcpy(&i, src, sizeof(i));
        fprintf(out, "%" PRId64, i);
        break;
    case RV_CFG_SIZE:
        memcpy(&u, src, sizeof(u));
        rv__config_format_size(u, buf, sizeof(buf));
        fputs(buf, out);
        break;
    case RV_CFG_BOOL:
        memcpy(&b, src, sizeof(b));
        fputs(b ? "true" : "false", out);
        break;
    case RV_CFG_STRING:
        memcpy(buf, src, RV_CONFIG_STR_MAX);
        buf[RV_CONFIG_STR_MAX] = '\0';
        write_quoted(buf, out);
        break;
    case RV_CFG_ENUM:
        memcpy(&e, src, sizeof(e));
        if (rv__config_enum_span(r->f, e, &name, &len))
            fprintf(out, "%.*s", (int)len, name);
        else
            fprintf(out, "%d", e); /* not a valid value: reload will say so */
        break;
    }
}

/* ---------------------------------------------------------------------- */
/* Markdown                                                                */
/* ---------------------------------------------------------------------- */

/* Writes @p s into a Markdown table cell, escaping the column separator. */
static void write_cell(const char *s, FILE *out)
{
    for (; *s; s++) {
        if (*s == '|')
            fputc('\\', out);
        fputc(*s, out);
    }
}

/* Writes the range / values cell of row @p f. */
static void write_range(const rv_config_field_t *f, FILE *out)
{
    char lo[32], hi[32];
    const char *name;
    size_t len;

    switch (f->type) {
    case RV_CFG_INT:
        fprintf(out, "%" PRId64 "..%" PRId64, f->min, f->max);
        break;
    case RV_CFG_SIZE:
        rv__config_format_size((uint64_t)f->min, lo, sizeof(lo));
        rv__config_format_size((uint64_t)f->max, hi, sizeof(hi));
        fprintf(out, "%s..%s", lo, hi);
        break;
    case RV_CFG_BOOL:
        fprintf(out, "true, false");
        break;
    case RV_CFG_STRING:
        if (f->min > 0)
            fprintf(out, "%" PRId64 "..%" PRId64 " bytes", f->min,
                    rv__config_string_max(f));
        else
            fprintf(out, "up to %" PRId64 " bytes", rv__config_string_max(f));
        break;
    case RV_CFG_ENUM:
        for (int i = 0; rv__config_enum_span(f, i, &name, &len); i++)
            fprintf(out, "%s`%.*s`", i ? ", " : "", (int)len, name);
        break;
    }
}

static void write_reference_row(const row_t *r, FILE *out)
{
    static const char *const type_names[] = {
        [RV_CFG_INT] = "integer",  [RV_CFG_SIZE] = "size",
        [RV_CFG_BOOL] = "boolean", [RV_CFG_STRING] = "string",
        [RV_CFG_ENUM] = "enum",
    };
    char env[RV_CFG_KEY_MAX + 8];

    rv__config_env_name(r->key, env, sizeof(env));
    fprintf(out, "| `%s` | %s | `%s` | ", r->key, type_names[r->f->type],
            r->f->def);
    write_range(r->f, out);
    fprintf(out, " | `%s` | ", env);
    if (r->f->later != NULL) {
        fprintf(out, "*Not supported yet (");
        write_cell(r->f->later, out);
        fprintf(out, ").* ");
    }
    write_cell(r->f->help, out);
    fprintf(out, " |\n");
}

/* ---------------------------------------------------------------------- */
/* The walk                                                                */
/* ---------------------------------------------------------------------- */

/* True if some row under @p prefix (@p len bytes, ending with a dot) is
 * supported: a section holding only keys not supported yet is not opened
 * in the dump, its keys are comments. */
static bool section_supported(const walk_t *w, const char *prefix, size_t len)
{
    for (size_t i = 0; i < w->nrows; i++) {
        if (strncmp(w->rows[i].key, prefix, len) == 0 &&
            w->rows[i].f->later == NULL)
            return true;
    }
    return false;
}

/* Writes the help of the component whose prefix is @p section, if any. */
static void write_help(const walk_t *w, const char *section, size_t len,
                       int depth)
{
    for (size_t i = 0; i < w->ntables; i++) {
        if (strlen(w->tables[i]->prefix) == len &&
            strncmp(w->tables[i]->prefix, section, len) == 0 &&
            w->tables[i]->help != NULL)
            fprintf(w->out, "%*s# %s\n", 2 * depth, "", w->tables[i]->help);
    }
}

static void visit_key(const walk_t *w, const row_t *r, const char *name,
                      int depth)
{
    if (w->reference) {
        write_reference_row(r, w->out);
        return;
    }
    if (r->f->later == NULL) {
        fprintf(w->out, "%*s%s: ", 2 * depth, "", name);
        write_value(r, w->out);
    } else {
        fprintf(w->out, "%*s# %s: ", 2 * depth, "", r->key);
        write_value(r, w->out);
        fprintf(w->out, "  (not supported yet: %s)", r->f->later);
    }
    fputc('\n', w->out);
}

/*
 * Visits the rows under @p prefix (length @p plen, "" or "section.") at
 * @p depth, each subsection where its first key appears, with all of its
 * keys (those of other tables included) together.
 */
static void walk_section(const walk_t *w, const char *prefix, size_t plen,
                         int depth)
{
    for (size_t i = 0; i < w->nrows; i++) {
        const row_t *r = &w->rows[i];
        const char *rest;
        bool seen = false, open;
        size_t clen;

        if (strncmp(r->key, prefix, plen) != 0)
            continue;
        rest = r->key + plen;
        clen = strcspn(rest, ".");
        if (rest[clen] == '\0') { /* a key of this section */
            visit_key(w, r, rest, depth);
            continue;
        }
        for (size_t j = 0; j < i && !seen; j++)
            seen = strncmp(w->rows[j].key, r->key, plen + clen + 1) == 0;
        if (seen)
            continue;
        open = section_supported(w, r->key, plen + clen + 1);
        if (!w->reference) {
            write_help(w, r->key, plen + clen, depth);
            if (open)
                fprintf(w->out, "%*s%.*s:\n", 2 * depth, "", (int)clen, rest);
        }
        walk_section(w, r->key, plen + clen + 1, open ? depth + 1 : depth);
    }
}

void rv_config_dump(const rv_config_t *cfg, FILE *out)
{
    walk_t w = {.out = out, .reference = false};

    if (cfg == NULL || out == NULL)
        return;
    if (walk_init(&w, cfg) != RV_OK) {
        rv_error("rivet configuration: out of memory writing the dump");
        walk_fini(&w);
        return;
    }
    fprintf(out, "# rivet configuration (keys not supported yet are shown "
                 "as comments)\n");
    walk_section(&w, "", 0, 0);
    walk_fini(&w);
}

void rv_config_print_reference(FILE *out)
{
    walk_t w = {.out = out, .reference = true};

    if (walk_init(&w, NULL) != RV_OK) {
        rv_error("rivet configuration: out of memory writing the reference");
        walk_fini(&w);
        return;
    }
    fprintf(out, "| key | type | default | range / values | environment "
                 "variable | description |\n");
    fprintf(out, "|---|---|---|---|---|---|\n");
    walk_section(&w, "", 0, 0);
    fprintf(out, "\nSizes take a whole number of bytes or a "
                 "unit: " RV_CFG_SIZE_UNITS_TEXT ", case-insensitive.\n"
                 "Environment variables override the file.\n");
    walk_fini(&w);
}
