/*
 * Fuzz target: a configuration file, as rv_config_load reads it from disk
 * (libyaml, then the walk of the schema in rv_config_yaml.c and the value
 * parsers of every key it names).
 *
 * The input is the file's bytes, written to a memory file that the loader
 * opens by its /proc path, so that it goes through the same read as a
 * job file. A file that loads is written back with rv_config_dump, which
 * promises YAML that loads unchanged: the dump is loaded and dumped again,
 * and the two dumps must be equal.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"
#include "rv_config.h"

#define ERR_MAX 1024

extern char **environ;

static int file_fd = -1;
static char file_path[64];

/* Drops every RIVET_* variable, so that the environment overrides play no
 * part and a run depends on its input alone. */
static void clear_rivet_env(void)
{
    for (char **e = environ; *e != NULL;) {
        if (strncmp(*e, "RIVET_", 6) == 0) {
            char name[256];
            size_t n = strcspn(*e, "=");
            snprintf(name, sizeof(name), "%.*s", (int)n, *e);
            unsetenv(name);
            e = environ; /* unsetenv moved the rest */
        } else {
            e++;
        }
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    clear_rivet_env();
    file_fd = memfd_create("rivet-fuzz-config", MFD_CLOEXEC);
    if (file_fd < 0) {
        perror("memfd_create");
        abort();
    }
    snprintf(file_path, sizeof(file_path), "/proc/self/fd/%d", file_fd);
    return 0;
}

/* Makes the memory file hold exactly @p len bytes of @p data. */
static void file_set(const void *data, size_t len)
{
    if (ftruncate(file_fd, 0) != 0 ||
        (len > 0 && pwrite(file_fd, data, len, 0) != (ssize_t)len)) {
        perror("memory file");
        abort();
    }
}

/* rv_config_dump of @p cfg, malloc'ed; *len_p its length. */
static char *dump(const rv_config_t *cfg, size_t *len_p)
{
    char *text = NULL;
    FILE *f = open_memstream(&text, len_p);

    if (f == NULL)
        abort();
    rv_config_dump(cfg, f);
    fclose(f);
    return text;
}

/* A loaded file dumps to YAML that loads back to the same dump. */
static void check_round_trip(const rv_config_t *cfg)
{
    char err[ERR_MAX] = "";
    size_t len1, len2;
    char *text1 = dump(cfg, &len1), *text2;
    rv_config_t *again = NULL;

    file_set(text1, len1);
    if (rv_config_load(file_path, &again, err, sizeof(err)) != RV_OK) {
        fprintf(stderr, "the dump of a loaded file does not load: %s\n%s\n",
                err, text1);
        abort();
    }
    text2 = dump(again, &len2);
    if (len1 != len2 || memcmp(text1, text2, len1) != 0) {
        fprintf(stderr, "the dump changed on reload:\n%s\n---\n%s\n", text1,
                text2);
        abort();
    }
    free(text2);
    free(text1);
    rv_config_free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[ERR_MAX] = "";
    rv_config_t *cfg = NULL;

    if (file_fd < 0)
        LLVMFuzzerInitialize(NULL, NULL);
    file_set(data, size);
    if (rv_config_load(file_path, &cfg, err, sizeof(err)) == RV_OK) {
        check_round_trip(cfg);
        rv_config_free(cfg);
    } else if (err[0] == '\0' || err[0] == '\n' ||
               strstr(err, "\n\n") != NULL ||
               err[strlen(err) - 1] == '\n') {
        /* Every refusal says why: each bad key on a line of its own, and
         * no line empty. */
        fprintf(stderr, "a refused file without its reasons, one a line: "
                        "'%s'\n",
                err);
        abort();
    }
    return 0;
}
