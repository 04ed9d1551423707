/*
 * Fuzz target: the value parsers of configuration keys and the size
 * parser.
 *
 * The first byte chooses the parser: rv_config_parse_size (a layer's
 * STRING key that also takes a size, such as store.rndv_threshold), or
 * the row of a key of core's and the built-in layers' tables (two more
 * bytes name it), whose value is parsed as the YAML walk does: the
 * scalar's bytes, NUL-terminated, with their length (a double-quoted YAML
 * scalar may hold a NUL before its end) and whether it was a null. The
 * rest of the input is the text.
 *
 * A value that parses is read back as rivet-config --dump writes it, and
 * that text must parse to the same value.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "rv_config_internal.h"

#define MODE_SIZE 0 /* first byte even: rv_config_parse_size */
#define FLAG_NULL 2 /* the scalar was a YAML null */

static rv_config_t *cfg;
static const rv_config_field_t *rows[1024];
static const rv_config_table_t *row_table[1024];
static size_t nrows;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const rv_config_table_t *tables[RV_CFG_MAX_TABLES];
    char err[RV_CFG_MSG_MAX];
    size_t n;

    (void)argc;
    (void)argv;
    if (rv_config_load(NULL, &cfg, err, sizeof(err)) != RV_OK) {
        fprintf(stderr, "cannot load the defaults: %s\n", err);
        abort();
    }
    n = rv__config_tables(tables, false);
    for (size_t t = 0; t < n; t++)
        for (const rv_config_field_t *f = tables[t]->fields;
             f->name != NULL && nrows < sizeof(rows) / sizeof(rows[0]); f++) {
            rows[nrows] = f;
            row_table[nrows++] = tables[t];
        }
    return 0;
}

/* The size parser; a size written as the reference writes it reads back. */
static void fuzz_size(const char *text)
{
    uint64_t v, again;
    char buf[64];

    if (rv_config_parse_size(text, &v) != RV_OK)
        return;
    rv__config_format_size(v, buf, sizeof(buf));
    if (rv_config_parse_size(buf, &again) != RV_OK || again != v) {
        fprintf(stderr, "size '%s' = %" PRIu64 " reads back from '%s' as "
                "%" PRIu64 "\n", text, v, buf, again);
        abort();
    }
}

/* Row @p i's parser, into the configuration's own component. */
static void fuzz_row(size_t i, const char *text, size_t len, bool is_null)
{
    const rv_config_field_t *f = rows[i];
    char key[RV_CFG_KEY_MAX], why[RV_CFG_MSG_MAX / 2], back[RV_CONFIG_STR_MAX];
    rv_config_comp_t *comp;
    void *scratch;

    rv__config_full_key(row_table[i], f, key, sizeof(key));
    if (rv__config_find(cfg, key, &comp) != f)
        abort(); /* the table lookup itself is broken */
    if (!rv__config_parse(f, text, len, is_null, comp->data, why, sizeof(why)))
        return;
    if (rv_config_get(cfg, key, back, sizeof(back)) != RV_OK) {
        fprintf(stderr, "%s: a value that parsed cannot be read back\n", key);
        abort();
    }
    scratch = malloc(row_table[i]->size);
    if (scratch == NULL)
        abort();
    memcpy(scratch, comp->data, row_table[i]->size);
    why[0] = '\0';
    if (!rv__config_parse(f, back, strlen(back), false, scratch, why,
                          sizeof(why)) ||
        memcmp(scratch, comp->data, row_table[i]->size) != 0) {
        fprintf(stderr, "%s: '%.*s' reads back as '%s', which %s\n", key,
                (int)len, text, back,
                why[0] ? why : "parses to another value");
        abort();
    }
    free(scratch);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in_t in = {data, size};
    uint8_t mode;
    uint16_t row;
    char *text;

    if (cfg == NULL)
        LLVMFuzzerInitialize(NULL, NULL);
    mode = fuzz_u8(&in);
    row = (mode & 1) != MODE_SIZE ? fuzz_u16(&in) : 0;
    /* NUL-terminated, as libyaml and the environment give it. */
    text = fuzz_string(in.p, in.left);
    if ((mode & 1) == MODE_SIZE)
        fuzz_size(text);
    else
        fuzz_row(row % nrows, text, in.left, (mode & FLAG_NULL) != 0);
    fuzz_free((uint8_t *)text, in.left + 1);
    return 0;
}
