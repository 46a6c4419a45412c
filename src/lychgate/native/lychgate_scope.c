/* The scope key of a split route table, computed by Envoy as an early header
 * mutation (envoy.http.early_header_mutation.dynamic_modules), in place of the
 * CEL expression of lychgate/xds/translator/scoped.py: that one runs one RE2
 * regex per key bit and resolves request.host for each; this one reads
 * :authority once and hashes it in one pass.
 *
 * Its hash is not CEL's (bit j the parity of the host's characters in set j,
 * what RE2 can compute: 6 bits at most, and numbered host names spread unevenly
 * past that). It is FNV-1a over the host's bytes, then MurmurHash3's 32-bit
 * finalizer, and its low bits (at most 8): every bit depends on every
 * character, so host names spread evenly over up to 256 scopes. scoped.bucket()
 * with `native` computes the same for route hostnames. ASCII case and a
 * trailing ":<digits>" port are ignored, as Envoy's host matching does, and a
 * host with any character outside the alphabet hashes to 0 (the scope where
 * wildcard hosts and the catch-all are, as in every scope).
 *
 * Config (a StringValue, fields parted by one space):
 *   <header> <prefix> <alphabet> #<bits>
 * sets <header> to <prefix><hash>, e.g. "x-lychgate-scope" = "http/3". The
 * alphabet comes from scoped.py, its one definition. (The module before this
 * one took the parity sets in place of "#<bits>", and refuses this config: '#'
 * is in no alphabet. A proxy image with it makes Envoy reject the listener
 * rather than key scopes with the other hash.)
 *
 * Envoy's ABI (source/extensions/dynamic_modules/abi/abi.h) is declared here
 * for the few types and functions used: no Envoy header is needed to build. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* --- The part of Envoy's dynamic module ABI this module uses. --- */

/* A string Envoy owns (valid for the call) and one the module owns. */
typedef struct { const char *ptr; size_t length; } envoy_buffer;
typedef struct { const char *ptr; size_t length; } module_buffer;

/* Envoy logs a warning, no more, when this differs from its own version. */
#define ABI_VERSION "v0.2.0"

bool envoy_dynamic_module_callback_early_header_mutation_get_header_value(
    void *request, module_buffer key, envoy_buffer *value, size_t index, size_t *count);
bool envoy_dynamic_module_callback_early_header_mutation_set_header(
    void *request, module_buffer key, module_buffer value);

/* --- The scope key. --- */

#define MAX_BITS 8

struct scope_config {
    char header[64];
    size_t header_len;
    bool valid[256]; /* per byte: the character (or its upper case) is in the alphabet */
    unsigned bits;
    size_t prefix_len;
    char prefix[]; /* the table's name and '/': no limit, as listener names have none */
};

static uint8_t lower(uint8_t c) { return c >= 'A' && c <= 'Z' ? (uint8_t)(c + 32) : c; }

/* The next space-delimited field of [*at, end), or false when none is left. */
static bool field(const char **at, const char *end, const char **start, size_t *len) {
    if (*at >= end) return false;
    const char *stop = memchr(*at, ' ', (size_t)(end - *at));
    if (stop == NULL) stop = end;
    *start = *at;
    *len = (size_t)(stop - *at);
    *at = stop < end ? stop + 1 : end;
    return *len > 0;
}

static struct scope_config *parse(const char *at, size_t length) {
    const char *end = at + length, *s;
    size_t n;
    struct scope_config *cfg = calloc(1, sizeof *cfg + length); /* the prefix is shorter than all */
    if (cfg == NULL) return NULL;
    if (!field(&at, end, &s, &n) || n >= sizeof cfg->header) goto bad;
    memcpy(cfg->header, s, n);
    cfg->header_len = n;
    if (!field(&at, end, &s, &n)) goto bad;
    memcpy(cfg->prefix, s, n);
    cfg->prefix_len = n;
    if (!field(&at, end, &s, &n)) goto bad;
    for (size_t i = 0; i < n; i++) {
        uint8_t c = lower((uint8_t)s[i]);
        cfg->valid[c] = true;
        if (c >= 'a' && c <= 'z') cfg->valid[c - 32] = true;
    }
    /* "#<bits>", the last field */
    if (!field(&at, end, &s, &n) || n != 2 || s[0] != '#' || at < end) goto bad;
    if (s[1] < '1' || s[1] > '0' + MAX_BITS) goto bad;
    cfg->bits = (unsigned)(s[1] - '0');
    return cfg;
bad:
    free(cfg);
    return NULL;
}

static unsigned hash(const struct scope_config *cfg, const uint8_t *host, size_t len) {
    /* Envoy matches hosts without their port: drop a trailing ":<digits>". */
    size_t cut = len;
    while (cut > 0 && host[cut - 1] >= '0' && host[cut - 1] <= '9') cut--;
    if (cut > 0 && host[cut - 1] == ':') len = cut - 1;
    if (len == 0) return 0; /* no host: no exact host matches it */
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < len; i++) {
        if (!cfg->valid[host[i]]) return 0;
        h = (h ^ lower(host[i])) * 16777619u;
    }
    h ^= h >> 16; /* MurmurHash3's fmix32 */
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h & ((1u << cfg->bits) - 1);
}

/* --- The module's side of the ABI. --- */

const char *envoy_dynamic_module_on_program_init(void) { return ABI_VERSION; }

void *envoy_dynamic_module_on_early_header_mutation_config_new(
    void *envoy_config, envoy_buffer name, envoy_buffer config) {
    (void)envoy_config;
    (void)name;
    return parse(config.ptr, config.length); /* NULL: Envoy rejects the config */
}

void envoy_dynamic_module_on_early_header_mutation_config_destroy(void *config) { free(config); }

bool envoy_dynamic_module_on_early_header_mutation_mutate(void *config, void *request) {
    const struct scope_config *cfg = config;
    static const char authority[] = ":authority";
    envoy_buffer host = {NULL, 0};
    size_t count = 0;
    unsigned key = 0;
    if (envoy_dynamic_module_callback_early_header_mutation_get_header_value(
            request, (module_buffer){authority, sizeof authority - 1}, &host, 0, &count) && host.ptr != NULL)
        key = hash(cfg, (const uint8_t *)host.ptr, host.length);
    char value[cfg->prefix_len + 3];
    memcpy(value, cfg->prefix, cfg->prefix_len);
    size_t len = cfg->prefix_len;
    if (key >= 100) value[len++] = (char)('0' + key / 100);
    if (key >= 10) value[len++] = (char)('0' + key / 10 % 10);
    value[len++] = (char)('0' + key % 10);
    envoy_dynamic_module_callback_early_header_mutation_set_header(
        request, (module_buffer){cfg->header, cfg->header_len}, (module_buffer){value, len});
    return true; /* later early mutations run too */
}
