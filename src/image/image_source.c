/* SPDX-License-Identifier: Apache-2.0 */
/* Image sources: an OCI image layout (index.json, blobs/sha256/), including an unpacked
 * oci-archive, and a docker-archive (`docker save`: manifest.json). Every file is read through the
 * source's fs_root and every blob checked against its digest before it is used; index.json is
 * followed through nested indexes to the manifest for this host's platform. */
#include "image/image_source.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/util.h"
#include "image/image_util.h"

#define MAX_JSON_BLOB (4u << 20) /* index, manifest, config */
#define MAX_INDEX_DEPTH 4

/* Parse "sha256:<64 hex>" into hex. Anything else (other algorithms, "../") is refused. */
static int parse_digest(const char *digest, char hex[65], sbx_error_t *err)
{
  char b[160];
  if (!digest || strncmp(digest, "sha256:", 7) || strlen(digest) != 7 + 64)
    return sbx_error_set(err, EINVAL, "unsupported or malformed digest `%s` (only sha256)",
                         image_shown(digest ? digest : "", b));
  for (int i = 0; i < 64; i++) {
    char c = digest[7 + i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
      return sbx_error_set(err, EINVAL, "malformed digest `%s`", image_shown(digest, b));
    hex[i] = c;
  }
  hex[64] = '\0';
  return 0;
}

/* Map a file of the source (a regular file, at most max bytes); with want_hex, check its sha256;
 * with size >= 0, its size. */
static int map_source_file(struct image_source *s, const char *path, const char *want_hex, int64_t size,
                           size_t max, struct mapping *ret, char got_hex[65], sbx_error_t *err)
{
  char b[160];
  _cleanup_close_ int fd = fs_root_open_file(&s->root, path);
  struct stat st;
  if (fd < 0)
    return sbx_error_errno(err, "`%s`: open `%s`", s->src, image_shown(path, b));
  if (fstat(fd, &st) < 0)
    return sbx_error_errno(err, "`%s`: stat `%s`", s->src, image_shown(path, b));
  if (!S_ISREG(st.st_mode))
    return sbx_error_set(err, EINVAL, "`%s`: `%s` is not a regular file", s->src, image_shown(path, b));
  if (size >= 0 && st.st_size != size)
    return sbx_error_set(err, EINVAL, "`%s`: `%s` is %lld bytes, its descriptor says %lld", s->src,
                         image_shown(path, b), (long long) st.st_size, (long long) size);
  if ((uint64_t) st.st_size > max)
    return sbx_error_set(err, EFBIG, "`%s`: `%s` is larger than %zu bytes", s->src, image_shown(path, b),
                         max);
  struct mapping m = {0};
  if (image_map_fd(fd, (size_t) st.st_size, &m) < 0)
    return sbx_error_errno(err, "`%s`: map `%s`", s->src, image_shown(path, b));
  char hex[65];
  sha256_hex(m.data ? m.data : "", m.len, hex);
  if (want_hex && strcmp(hex, want_hex)) {
    image_unmapp(&m);
    return sbx_error_set(err, EINVAL, "`%s`: `%s` has digest sha256:%s, expected sha256:%s", s->src,
                         image_shown(path, b), hex, want_hex);
  }
  if (got_hex)
    memcpy(got_hex, hex, 65);
  *ret = m;
  return 0;
}

/* A blob named by an OCI descriptor: digest and size verified. */
static int map_blob(struct image_source *s, const json_node_t *desc, size_t max, struct mapping *ret,
                    char digest[72], sbx_error_t *err)
{
  char hex[65], path[96];
  const char *d = json_as_string(json_get(desc, "digest"), NULL);
  long long size;
  if (json_as_int(json_get(desc, "size"), &size) < 0 || size < 0)
    return sbx_error_set(err, EINVAL, "`%s`: a descriptor without a valid size", s->src);
  if (parse_digest(d, hex, err) < 0)
    return sbx_error_prefix(err, "`%s`", s->src);
  if (bufprintf(path, sizeof path, err, "blobs/sha256/%s", hex) < 0)
    return -1;
  if (map_source_file(s, path, hex, size, max, ret, NULL, err) < 0)
    return -1;
  return digest ? bufprintf(digest, 72, err, "sha256:%s", hex) : 0;
}

static int parse_json_mapping(struct image_source *s, const struct mapping *m, const char *what,
                              json_node_t **ret, sbx_error_t *err)
{
  if (json_parse(m->data ? m->data : "", m->len, ret, err) < 0)
    return sbx_error_prefix(err, "`%s`: %s", s->src, what);
  if (json_type(*ret) != JSON_OBJECT) {
    json_free(*ret);
    return sbx_error_set(err, EINVAL, "`%s`: %s is not a JSON object", s->src, what);
  }
  return 0;
}

static void host_platform(char os[16], char arch[16], char variant[16])
{
  struct utsname u;
  strcpy(os, "linux");
  variant[0] = '\0';
  if (uname(&u) < 0 || !strcmp(u.machine, "x86_64"))
    strcpy(arch, "amd64");
  else if (!strcmp(u.machine, "aarch64")) {
    strcpy(arch, "arm64");
    strcpy(variant, "v8");
  } else if (!strcmp(u.machine, "i686") || !strcmp(u.machine, "i386"))
    strcpy(arch, "386");
  else if (bufprintf(arch, 16, NULL, "%s", u.machine) < 0)
    strcpy(arch, "?"); /* matches no image */
}

static bool platform_matches(const json_node_t *p)
{
  char os[16], arch[16], variant[16];
  host_platform(os, arch, variant);
  const char *pos = json_as_string(json_get(p, "os"), NULL);
  const char *parch = json_as_string(json_get(p, "architecture"), NULL);
  const char *pvar = json_as_string(json_get(p, "variant"), NULL);
  return pos && parch && !strcmp(pos, os) && !strcmp(parch, arch) &&
         (!pvar || !*variant || !strcmp(pvar, variant));
}

/* From an index (image index / manifest list), the descriptor for this host. */
static const json_node_t *pick_manifest(struct image_source *s, const json_node_t *index, sbx_error_t *err)
{
  const json_node_t *ms = json_get(index, "manifests");
  size_t n = json_array_len(ms), with_platform = 0;
  if (json_type(ms) != JSON_ARRAY || n == 0) {
    sbx_error_set(err, EINVAL, "`%s`: an image index without manifests", s->src);
    return NULL;
  }
  for (size_t i = 0; i < n; i++) {
    const json_node_t *p = json_get(json_array_at(ms, i), "platform");
    if (!p)
      continue;
    with_platform++;
    if (platform_matches(p))
      return json_array_at(ms, i);
  }
  /* No platforms (a layout holding one image): take the first; its config is checked later. */
  if (with_platform == 0)
    return json_array_at(ms, 0);
  char os[16], arch[16], variant[16];
  host_platform(os, arch, variant);
  sbx_error_set(err, ENOENT, "`%s`: no image for %s/%s among %zu platforms", s->src, os, arch, with_platform);
  return NULL;
}

static bool is_index(const json_node_t *doc)
{
  const char *mt = json_as_string(json_get(doc, "mediaType"), NULL);
  if (mt && (!strcmp(mt, "application/vnd.oci.image.index.v1+json") ||
             !strcmp(mt, "application/vnd.docker.distribution.manifest.list.v2+json")))
    return true;
  return json_get(doc, "manifests") && !json_get(doc, "layers");
}

void image_free(struct image *im)
{
  json_free(im->manifest);
  json_free(im->config);
  json_free(im->docker_manifest);
}

static int load_oci(struct image_source *s, struct image *im, sbx_error_t *err)
{
  struct mapping m __attribute__((cleanup(image_unmapp))) = {0};
  json_node_t *doc = NULL;
  if (map_source_file(s, "index.json", NULL, -1, MAX_JSON_BLOB, &m, NULL, err) < 0 ||
      parse_json_mapping(s, &m, "index.json", &doc, err) < 0)
    return -1;
  image_unmapp(&m);
  /* index.json -> (nested indexes: multi-platform images) -> the manifest for this host. */
  for (int depth = 0; is_index(doc); depth++) {
    const json_node_t *desc = depth < MAX_INDEX_DEPTH ? pick_manifest(s, doc, err) : NULL;
    if (depth >= MAX_INDEX_DEPTH)
      sbx_error_set(err, ELOOP, "`%s`: image indexes nested too deep", s->src);
    json_node_t *next = NULL;
    int r = desc ? map_blob(s, desc, MAX_JSON_BLOB, &m, im->manifest_digest, err) : -1;
    if (r == 0)
      r = parse_json_mapping(s, &m, "manifest", &next, err);
    image_unmapp(&m);
    json_free(doc);
    if (r < 0)
      return -1;
    doc = next;
  }
  im->manifest = doc;
  if (!im->manifest_digest[0])
    return sbx_error_set(err, EINVAL, "`%s`: index.json holds no manifest descriptor", s->src);
  const json_node_t *cdesc = json_get(doc, "config");
  if (!cdesc)
    return sbx_error_set(err, EINVAL, "`%s`: manifest %s has no config", s->src, im->manifest_digest);
  if (map_blob(s, cdesc, MAX_JSON_BLOB, &m, im->config_digest, err) < 0 ||
      parse_json_mapping(s, &m, "config", &im->config, err) < 0)
    return -1;
  im->layers = json_get(doc, "layers");
  if (json_type(im->layers) != JSON_ARRAY)
    return sbx_error_set(err, EINVAL, "`%s`: manifest %s has no layers", s->src, im->manifest_digest);
  return 0;
}

static bool is_hex64(const char *s, size_t n)
{
  if (n != 64)
    return false;
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
      return false;
  return true;
}

/* docker-archive: manifest.json names the config and layer files; the config's digest is checked
 * when its file name carries one, each layer against the config's diff_ids. */
static int load_docker(struct image_source *s, struct image *im, sbx_error_t *err)
{
  struct mapping m __attribute__((cleanup(image_unmapp))) = {0};
  char b[160];
  if (map_source_file(s, "manifest.json", NULL, -1, MAX_JSON_BLOB, &m, NULL, err) < 0)
    return -1;
  if (json_parse(m.data ? m.data : "", m.len, &im->docker_manifest, err) < 0)
    return sbx_error_prefix(err, "`%s`: manifest.json", s->src);
  const json_node_t *entry = json_array_at(im->docker_manifest, 0);
  if (json_array_len(im->docker_manifest) != 1 || json_type(entry) != JSON_OBJECT)
    return sbx_error_set(err, EINVAL, "`%s`: manifest.json must describe exactly one image", s->src);
  const char *cfg = json_as_string(json_get(entry, "Config"), NULL);
  if (!cfg)
    return sbx_error_set(err, EINVAL, "`%s`: manifest.json has no Config", s->src);
  /* "<hex>.json" (docker < 25) or "blobs/sha256/<hex>". */
  const char *cbase = strrchr(cfg, '/') ? strrchr(cfg, '/') + 1 : cfg;
  size_t clen = strcspn(cbase, ".");
  char want[65], got[65];
  bool named = is_hex64(cbase, clen);
  if (named && bufprintf(want, sizeof want, err, "%.64s", cbase) < 0)
    return -1;
  image_unmapp(&m);
  if (map_source_file(s, cfg, named ? want : NULL, -1, MAX_JSON_BLOB, &m, got, err) < 0 ||
      parse_json_mapping(s, &m, "config", &im->config, err) < 0)
    return -1;
  if (bufprintf(im->config_digest, sizeof im->config_digest, err, "sha256:%s", got) < 0 ||
      bufprintf(im->manifest_digest, sizeof im->manifest_digest, err, "sha256:%s", got) < 0)
    return -1;
  im->layers = json_get(entry, "Layers");
  const json_node_t *diff_ids = json_get(json_get(im->config, "rootfs"), "diff_ids");
  if (json_type(im->layers) != JSON_ARRAY || json_array_len(im->layers) != json_array_len(diff_ids))
    return sbx_error_set(err, EINVAL, "`%s`: manifest.json Layers do not match the config's diff_ids (%s)",
                         s->src, image_shown(cfg, b));
  return 0;
}

int image_source_check_platform(const struct image *im, struct image_import_stats *st, sbx_error_t *err)
{
  char os[16], arch[16], variant[16];
  host_platform(os, arch, variant);
  const char *cos = json_as_string(json_get(im->config, "os"), NULL);
  const char *carch = json_as_string(json_get(im->config, "architecture"), NULL);
  const char *cvar = json_as_string(json_get(im->config, "variant"), NULL);
  if ((cos && strcmp(cos, os)) || (carch && strcmp(carch, arch)))
    return sbx_error_set(err, EINVAL, "image is for %s/%s, this host is %s/%s", cos ? cos : "?",
                         carch ? carch : "?", os, arch);
  if (bufprintf(st->platform, sizeof st->platform, err, "%s/%s%s%s", cos ? cos : os, carch ? carch : arch,
                cvar && *cvar ? "/" : "", cvar && *cvar ? cvar : "") < 0)
    return sbx_error_prefix(err, "image platform");
  return 0;
}

int image_source_load(struct image_source *s, struct image *im, sbx_error_t *err)
{
  return s->docker ? load_docker(s, im, err) : load_oci(s, im, err);
}

int image_source_map_layer(struct image_source *s, const struct image *im, size_t i, struct mapping *ret,
                           char digest[72], sbx_error_t *err)
{
  const json_node_t *l = json_array_at(im->layers, i);
  const json_node_t *diff_ids = json_get(json_get(im->config, "rootfs"), "diff_ids");
  char want[65];
  if (s->docker) {
    const char *path = json_as_string(l, NULL);
    if (!path || parse_digest(json_as_string(json_array_at(diff_ids, i), NULL), want, err) < 0)
      return sbx_error_set(err, EINVAL, "`%s`: layer %zu: bad path or diff_id", s->src, i + 1);
    /* docker-archive layers are uncompressed: their sha256 is the diff_id. */
    if (map_source_file(s, path, want, -1, SIZE_MAX, ret, NULL, err) < 0)
      return -1;
    if (bufprintf(digest, 72, err, "sha256:%s", want) < 0)
      return -1;
  } else {
    const char *mt = json_as_string(json_get(l, "mediaType"), NULL);
    if (mt && !strstr(mt, "tar"))
      return sbx_error_set(err, ENOTSUP, "`%s`: layer %zu: unsupported media type `%s`", s->src, i + 1, mt);
    if (mt && (strstr(mt, "encrypted") || (strchr(mt, '+') && !strstr(mt, "+gzip") && !strstr(mt, "+zstd"))))
      return sbx_error_set(err, ENOTSUP, "`%s`: layer %zu: unsupported media type `%s`", s->src, i + 1, mt);
    if (map_blob(s, l, SIZE_MAX, ret, digest, err) < 0)
      return sbx_error_prefix(err, "layer %zu", i + 1);
  }
  return 0;
}
