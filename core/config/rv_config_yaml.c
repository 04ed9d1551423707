/*
 * The configuration file: parsed by libyaml into a document
 * (yaml_parser_load), whose nodes carry the line and column every error
 * message names. The top level is a mapping of sections; nested mappings
 * form dotted keys, so
 *
 *     transport:
 *       ucx:
 *         tls: sm,self
 *
 * sets transport.ucx.tls. A section `transport.NAME` that the
 * configuration does not hold yet brings in the component of the plugin
 * librivet-NAME.so; a plugin that is not there is an error naming it.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "rv_config_internal.h"

#define READ_CHUNK 4096 /* least room kept free while reading the file */
#define READ_FIRST 8192 /* first buffer size */
#define UTF8_MASK 0xc0  /* a UTF-8 continuation byte is 10xxxxxx */
#define UTF8_CONTINUATION 0x80

/* Reports an error at a node of the file: "FILE:LINE:COL: error: ...". */
static rv_status_t error_at(rv_config_loader_t *ld, yaml_mark_t mark,
                            const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static rv_status_t error_at(rv_config_loader_t *ld, yaml_mark_t mark,
                            const char *fmt, ...)
{
    char what[RV_CFG_MSG_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    rv__config_report(ld, "%s:%zu:%zu: error: %s", ld->path, mark.line + 1,
                      mark.column + 1, what);
    return RV_ERR_CONFIG;
}

static const char *node_kind(const yaml_node_t *node)
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
static bool node_is_null(const yaml_node_t *node)
{
    const char *v = (const char *)node->data.scalar.value;

    if (node->type != YAML_SCALAR_NODE ||
        node->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return false;
    return v[0] == '\0' || strcmp(v, "~") == 0 || strcmp(v, "null") == 0 ||
           strcmp(v, "Null") == 0 || strcmp(v, "NULL") == 0;
}

static rv_status_t load_mapping(rv_config_loader_t *ld, yaml_document_t *doc,
                                yaml_node_t *map, const char *prefix);

/*
 * Builds the dotted key of @p pair (in a mapping at @p prefix) into
 * @p key, refusing names that are not plain, dotted or given twice.
 */
static rv_status_t pair_key(rv_config_loader_t *ld, yaml_document_t *doc,
                            yaml_node_pair_t *pair, yaml_node_t *map,
                            const char *prefix, char *key, size_t len)
{
    yaml_node_t *knode = yaml_document_get_node(doc, pair->key);
    const char *name;

    if (knode->type != YAML_SCALAR_NODE)
        return error_at(ld, knode->start_mark,
                        "%s%sexpected a name as key, got %s", prefix,
                        *prefix ? ": " : "", node_kind(knode));
    name = (const char *)knode->data.scalar.value;
    if (snprintf(key, len, "%s%s%s", prefix, *prefix ? "." : "", name) >=
        (int)len)
        return error_at(ld, knode->start_mark, "unknown key '%s%s%s'", prefix,
                        *prefix ? "." : "", name);
    if (strchr(name, '.') != NULL)
        return error_at(ld, knode->start_mark,
                        "%s: dotted keys are not accepted; write each "
                        "part as a nested mapping",
                        key);

    /* libyaml keeps duplicate keys; a later one would silently win. */
    for (yaml_node_pair_t *q = map->data.mapping.pairs.start; q < pair; q++) {
        yaml_node_t *qk = yaml_document_get_node(doc, q->key);
        if (qk->type == YAML_SCALAR_NODE &&
            strcmp((const char *)qk->data.scalar.value, name) == 0)
            return error_at(ld, knode->start_mark,
                            "%s: duplicate key (first given at line %zu, "
                            "column %zu)",
                            key, qk->start_mark.line + 1,
                            qk->start_mark.column + 1);
    }
    return RV_OK;
}

/* Sets key @p key, of row @p f in component @p comp, from @p vnode. */
static rv_status_t set_value(rv_config_loader_t *ld, const char *key,
                             const rv_config_field_t *f, rv_config_comp_t *comp,
                             const yaml_node_t *knode, const yaml_node_t *vnode)
{
    char why[RV_CFG_MSG_MAX / 2];

    if (f->later != NULL)
        return error_at(ld, knode->start_mark, "%s: not supported yet (%s)",
                        key, f->later);
    if (vnode->type != YAML_SCALAR_NODE)
        return error_at(ld, vnode->start_mark,
                        "%s: expected a single value, got %s", key,
                        node_kind(vnode));
    if (!rv__config_parse(f, (const char *)vnode->data.scalar.value,
                          vnode->data.scalar.length, node_is_null(vnode),
                          comp->data, why, sizeof(why)))
        return error_at(ld, vnode->start_mark, "%s: %s", key, why);
    return RV_OK;
}

/* set_value, remembering a key it refuses. */
static rv_status_t set_key(rv_config_loader_t *ld, const char *key,
                           const rv_config_field_t *f, rv_config_comp_t *comp,
                           const yaml_node_t *knode, const yaml_node_t *vnode)
{
    rv_status_t status = set_value(ld, key, f, comp, knode, vnode);
    if (status != RV_OK)
        rv__config_failed(ld, key);
    return status;
}

/*
 * True if @p key names a section, after bringing in the plugin of a
 * `transport.NAME` section the configuration does not hold yet. A scalar
 * value is a key, not a plugin's section.
 */
static bool is_section(rv_config_loader_t *ld, const char *key,
                       const yaml_node_t *vnode)
{
    char name[RV_CFG_KEY_MAX], why[RV_CFG_MSG_MAX];

    if (rv__config_is_section(ld->cfg, key))
        return true;
    if ((vnode->type == YAML_SCALAR_NODE && !node_is_null(vnode)) ||
        !rv__config_plugin_of(key, name, sizeof(name)) ||
        strchr(key + strlen("transport."), '.') != NULL)
        return false;
    return rv__config_attach_plugin(ld->cfg, name, why, sizeof(why)) == RV_OK &&
           rv__config_is_section(ld->cfg, key);
}

/* Handles one key: value pair of a mapping whose dotted path is @p prefix. */
static rv_status_t load_pair(rv_config_loader_t *ld, yaml_document_t *doc,
                             yaml_node_pair_t *pair, yaml_node_t *map,
                             const char *prefix)
{
    yaml_node_t *knode = yaml_document_get_node(doc, pair->key);
    yaml_node_t *vnode = yaml_document_get_node(doc, pair->value);
    const rv_config_field_t *f;
    char key[RV_CFG_KEY_MAX + 1], msg[RV_CFG_MSG_MAX];
    rv_config_comp_t *comp;
    rv_status_t status;

    status = pair_key(ld, doc, pair, map, prefix, key, sizeof(key));
    if (status != RV_OK)
        return status;
    f = rv__config_find(ld->cfg, key, &comp);
    if (f != NULL)
        return set_key(ld, key, f, comp, knode, vnode);

    if (is_section(ld, key, vnode)) {
        if (vnode->type == YAML_MAPPING_NODE)
            return load_mapping(ld, doc, vnode, key);
        if (node_is_null(vnode))
            return RV_OK; /* "section:" with nothing under it */
        return error_at(ld, vnode->start_mark,
                        "%s: expected a mapping (the section's keys), got "
                        "%s",
                        key, node_kind(vnode));
    }
    /* Prefer the kind the value suggests, then the other one. */
    rv__config_unknown(key, vnode->type == YAML_MAPPING_NODE, msg, sizeof(msg));
    return error_at(ld, knode->start_mark, "%s", msg);
}

static rv_status_t load_mapping(rv_config_loader_t *ld, yaml_document_t *doc,
                                yaml_node_t *map, const char *prefix)
{
    rv_status_t first = RV_OK;

    /* On past a bad key, so that one load names every bad key of the file
     * (each reported where it is); the first error is the result. */
    for (yaml_node_pair_t *pair = map->data.mapping.pairs.start;
         pair < map->data.mapping.pairs.top; pair++) {
        rv_status_t status = load_pair(ld, doc, pair, map, prefix);
        if (status == RV_ERR_NO_MEMORY)
            return status;
        if (first == RV_OK)
            first = status;
    }
    return first;
}

/* Reports a libyaml error with its problem text and position. */
static rv_status_t yaml_error(rv_config_loader_t *ld, const yaml_parser_t *p)
{
    yaml_mark_t mark = p->problem_mark;

    if (p->error == YAML_MEMORY_ERROR) {
        rv__config_report(ld, "%s: error: out of memory while parsing",
                          ld->path);
        return RV_ERR_NO_MEMORY;
    }
    if (p->error == YAML_READER_ERROR) {
        /* Reader errors carry a byte offset instead of a mark. */
        memset(&mark, 0, sizeof(mark));
        for (size_t i = 0; i < p->problem_offset && i < ld->text_len; i++) {
            if (ld->text[i] == '\n') {
                mark.line++;
                mark.column = 0;
            } else if ((ld->text[i] & UTF8_MASK) != UTF8_CONTINUATION) {
                mark.column++;
            }
        }
        return error_at(ld, mark, "invalid YAML: %s",
                        p->problem ? p->problem : "unreadable input");
    }
    if (p->context != NULL)
        return error_at(ld, mark,
                        "invalid YAML: %s (%s at line %zu, column %zu)",
                        p->problem ? p->problem : "syntax error", p->context,
                        p->context_mark.line + 1, p->context_mark.column + 1);
    return error_at(ld, mark, "invalid YAML: %s",
                    p->problem ? p->problem : "syntax error");
}

/* Reads all of @p path into a NUL-terminated buffer the caller frees. */
static rv_status_t read_file(rv_config_loader_t *ld, unsigned char **text_p,
                             size_t *len_p)
{
    unsigned char *text = NULL;
    size_t len = 0, cap = 0;
    rv_status_t status;
    FILE *fp;

    fp = fopen(ld->path, "rb");
    if (fp == NULL) {
        int err = errno;
        rv__config_report(ld, "cannot open %s: %s", ld->path, strerror(err));
        return err == ENOENT ? RV_ERR_NOT_FOUND : RV_ERR_IO;
    }
    for (;;) {
        if (cap - len < READ_CHUNK) {
            size_t bigger_cap = cap ? 2 * cap : READ_FIRST;
            unsigned char *bigger = realloc(text, bigger_cap);
            if (bigger == NULL) {
                rv__config_report(ld, "cannot read %s: out of memory",
                                  ld->path);
                status = RV_ERR_NO_MEMORY;
                goto err_free;
            }
            text = bigger;
            cap = bigger_cap;
        }
        size_t n = fread(text + len, 1, cap - len - 1, fp);
        len += n;
        if (n == 0)
            break;
    }
    if (ferror(fp)) {
        rv__config_report(ld, "cannot read %s: %s", ld->path, strerror(errno));
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

/* Loads the root of @p doc, then refuses a second document. */
static rv_status_t load_document(rv_config_loader_t *ld, yaml_parser_t *parser,
                                 yaml_document_t *doc)
{
    yaml_node_t *root = yaml_document_get_root_node(doc);
    yaml_document_t extra;
    rv_status_t status = RV_OK;

    if (root != NULL && root->type != YAML_MAPPING_NODE && !node_is_null(root))
        return error_at(ld, root->start_mark,
                        "expected a mapping of sections (job:, transport:, "
                        "...) at the top level, got %s",
                        node_kind(root));
    if (root != NULL && root->type == YAML_MAPPING_NODE)
        status = load_mapping(ld, doc, root, "");
    if (status != RV_OK)
        return status;

    /* A second document would be ignored silently; refuse it. */
    if (!yaml_parser_load(parser, &extra))
        return yaml_error(ld, parser);
    root = yaml_document_get_root_node(&extra);
    if (root != NULL)
        status = error_at(ld, root->start_mark,
                          "a second YAML document; a configuration is one "
                          "document");
    yaml_document_delete(&extra);
    return status;
}

rv_status_t rv__config_load_file(rv_config_loader_t *ld)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    unsigned char *text;
    rv_status_t status;

    status = read_file(ld, &text, &ld->text_len);
    if (status != RV_OK)
        return status;
    ld->text = text;

    if (!yaml_parser_initialize(&parser)) {
        rv__config_report(ld, "%s: error: out of memory while parsing",
                          ld->path);
        status = RV_ERR_NO_MEMORY;
        goto err_free_text;
    }
    yaml_parser_set_input_string(&parser, text, ld->text_len);
    if (!yaml_parser_load(&parser, &doc)) {
        status = yaml_error(ld, &parser);
        goto err_parser;
    }
    ld->parsed = true;
    status = load_document(ld, &parser, &doc);
    yaml_document_delete(&doc);
err_parser:
    yaml_parser_delete(&parser);
err_free_text:
    free(text);
    ld->text = NULL;
    return status;
}
