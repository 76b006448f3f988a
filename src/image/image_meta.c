/* SPDX-License-Identifier: Apache-2.0 */
/* Image metadata (STORE/NAME.json): what was imported from where, the image config's Env,
 * WorkingDir, Cmd..., what extraction dropped, and the file manifest's digest. Written at import;
 * `sandboxd exec` reads Env and WorkingDir back. */
#include "image/image_meta.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/json.h"
#include "base/util.h"
#include "image/image_util.h"

static void iso_time(time_t t, char out[32])
{
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void write_str_array(json_writer_t *w, const char *key, const json_node_t *arr)
{
  json_key(w, key);
  if (json_type(arr) == JSON_ARRAY)
    json_write_node(w, arr);
  else
    json_null(w);
}

int image_meta_write(int storefd, const char *file, const struct image_import_options *o, const char *source,
                     const struct image *im, const struct image_import_stats *st, const char *files_sha,
                     sbx_error_t *err)
{
  const json_node_t *cfg = json_get(im->config, "config");
  const char *created = json_as_string(json_get(im->config, "created"), NULL);
  const char *wd = json_as_string(json_get(cfg, "WorkingDir"), NULL);
  const char *user = json_as_string(json_get(cfg, "User"), NULL);
  char now[32], b[160];
  iso_time(time(NULL), now);
  json_writer_t *w = json_writer_new();
  if (!w)
    return sbx_error_set(err, ENOMEM, "metadata");
  json_obj_begin(w);
  json_kv_str(w, "name", o->name);
  json_kv_str(w, "source", source);
  json_kv_str(w, "manifest_digest", im->manifest_digest);
  json_kv_str(w, "config_digest", im->config_digest);
  json_kv_str(w, "platform", st->platform);
  json_kv_str_or_null(w, "created", created);
  json_kv_str(w, "imported", now);
  json_kv_uint(w, "size", st->bytes);
  json_kv_uint(w, "files", st->files + st->dirs + st->symlinks);
  write_str_array(w, "Env", json_get(cfg, "Env"));
  json_kv_str_or_null(w, "WorkingDir", wd && *wd ? wd : NULL);
  write_str_array(w, "Cmd", json_get(cfg, "Cmd"));
  write_str_array(w, "Entrypoint", json_get(cfg, "Entrypoint"));
  json_kv_str_or_null(w, "User", user && *user ? user : NULL);
  json_key(w, "Labels");
  json_type(json_get(cfg, "Labels")) == JSON_OBJECT ? json_write_node(w, json_get(cfg, "Labels"))
                                                    : json_null(w);
  json_key(w, "layers");
  json_arr_begin(w);
  for (size_t i = 0; i < json_array_len(im->layers); i++) {
    const json_node_t *l = json_array_at(im->layers, i);
    json_type(l) == JSON_OBJECT ? json_write_node(w, l)
                                : json_str(w, json_as_string(l, NULL) ? json_as_string(l, NULL) : "");
  }
  json_arr_end(w);
  json_key(w, "extraction");
  json_obj_begin(w);
  json_kv_uint(w, "devices_skipped", st->devices_skipped);
  json_kv_uint(w, "setuid_setgid_stripped", st->setid_stripped);
  json_kv_uint(w, "capabilities_stripped", st->caps_stripped);
  json_kv_bool(w, "privileges_kept", o->keep_privileges);
  json_obj_end(w);
  json_key(w, "files_manifest");
  if (bufprintf(b, sizeof b, err, "%s.files", o->name) < 0) {
    json_writer_free(w);
    return -1;
  }
  json_str(w, b);
  json_kv_str(w, "files_manifest_sha256", files_sha);
  json_obj_end(w);
  size_t len;
  const char *buf = json_writer_buf(w, &len);
  int ret = 0;
  _cleanup_close_ int fd =
      buf ? openat(storefd, file, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644) : -1;
  if (!buf)
    ret = sbx_error_set(err, ENOMEM, "metadata");
  else if (fd < 0 || write(fd, buf, len) != (ssize_t) len || write(fd, "\n", 1) != 1 || fsync(fd) < 0)
    ret = sbx_error_errno(err, "write `%s`", file);
  json_writer_free(w);
  return ret;
}

/* ------------------------------------------------------------------ exec config */

void image_config_free(struct image_config *c)
{
  for (size_t i = 0; i < c->n_env; i++)
    free(c->env[i]);
  free(c->env);
  free(c->workdir);
  free(c->preload);
  *c = (struct image_config){0};
}

int image_load_config(const char *rootfs, struct image_config *ret, sbx_error_t *err)
{
  char path[PATH_MAX], b[160];
  size_t n = strlen(rootfs);
  while (n > 1 && rootfs[n - 1] == '/')
    n--;
  if (bufprintf(path, sizeof path, NULL, "%.*s.json", (int) n, rootfs) < 0)
    return sbx_error_set(err, ENAMETOOLONG, "rootfs `%s`", image_shown(rootfs, b));
  _cleanup_free_ char *data = NULL;
  size_t len;
  struct image_config c = {0};
  if (read_file(path, 1u << 20, &data, &len, err) < 0) {
    if (err->errnum != ENOENT)
      return -1;
    *err = (sbx_error_t){0};
    *ret = c;
    return 0;
  }
  json_node_t *doc = NULL;
  if (json_parse(data, len, &doc, err) < 0)
    return sbx_error_prefix(err, "rootfs metadata `%s`", image_shown(path, b));
  const json_node_t *env = json_get(doc, "Env");
  const char *wd = json_as_string(json_get(doc, "WorkingDir"), NULL);
  const char *preload = json_as_string(json_get(json_get(doc, "Labels"), "org.sandboxd.preload"), NULL);
  size_t ne = json_array_len(env);
  int r = 0;
  if (ne && !(c.env = calloc(ne, sizeof *c.env)))
    r = sbx_error_set(err, ENOMEM, "rootfs metadata");
  for (size_t i = 0; i < ne && r == 0; i++) {
    size_t sl;
    const char *s = json_as_string(json_array_at(env, i), &sl);
    if (!s || sl != strlen(s) || !strchr(s, '=') || s[0] == '=')
      r = sbx_error_set(err, EINVAL, "rootfs metadata `%s`: Env[%zu] is not NAME=VALUE", image_shown(path, b),
                        i);
    else if (!(c.env[c.n_env++] = strdup(s)))
      r = sbx_error_set(err, ENOMEM, "rootfs metadata");
  }
  if (r == 0 && preload && !(c.preload = strdup(preload)))
    r = sbx_error_set(err, ENOMEM, "rootfs metadata");
  if (r == 0 && wd && *wd) {
    if (wd[0] != '/')
      r = sbx_error_set(err, EINVAL, "rootfs metadata `%s`: WorkingDir `%s` is not absolute",
                        image_shown(path, b), wd);
    else if (!(c.workdir = strdup(wd)))
      r = sbx_error_set(err, ENOMEM, "rootfs metadata");
  }
  json_free(doc);
  if (r < 0) {
    image_config_free(&c);
    return -1;
  }
  *ret = c;
  return 0;
}
