/* SPDX-License-Identifier: Apache-2.0 */
/* `sandboxd rootfs build|fetch|import|list|verify|remove`: root filesystem trees in a store
 * directory. build and fetch run their host tool in cli_rootfs_get.c. */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/json.h"
#include "base/log.h"
#include "base/util.h"
#include "cli/cli.h"
#include "cli/cli_rootfs.h"
#include "image/image.h"

static const char rootfs_usage[] =
    "usage: sandboxd rootfs build [--profile slim|data|node] [--name NAME] [--force] [--dir DIR]\n"
    "       sandboxd rootfs fetch [IMAGE] [--name NAME] [--timeout SECS] [--tls-verify=false] [OPTIONS]\n"
    "       sandboxd rootfs import SRC [--name NAME] [OPTIONS]\n"
    "       sandboxd rootfs list [--dir DIR]\n"
    "       sandboxd rootfs verify NAME [--dir DIR]\n"
    "       sandboxd rootfs remove NAME [--dir DIR]\n"
    "\n"
    "build   build a Debian-based tree offline (mmdebstrap; the recipe ships with sandboxd) as\n"
    "        DIR/NAME (default python-3.14-PROFILE, node-slim), a line per phase; --force rebuilds it\n"
    "fetch   pull IMAGE (default " ROOTFS_FETCH_DEFAULT_IMAGE ") with skopeo and import it\n"
    "        as DIR/NAME (default: the image's last path component, `:` as `-`: python-3.14-slim)\n"
    "import  unpack an OCI image layout directory, an oci-archive or a docker-archive (`docker save`)\n"
    "        into DIR/NAME, atomically; metadata (digest, Env, WorkingDir, platform...) goes to\n"
    "        DIR/NAME.json and a manifest of every file's digest to DIR/NAME.files\n"
    "list    show the trees in DIR\n"
    "verify  check that DIR/NAME still matches what was imported (exit 1 if not)\n"
    "remove  remove DIR/NAME and its metadata; a sandbox starting meanwhile finds all of it or none\n"
    "\n"
    "  --dir DIR          the store (default: $SANDBOXD_ROOTFS_DIR, else rootfs/ next to the build,\n"
    "                     else " PATHS_SYSTEM_STORE "); exec's default rootfs is DIR/" PATHS_DEFAULT_ROOTFS
    "\n"
    "  --profile P        build: slim (python:3.14-slim's equivalent, the default), data (+ numpy,\n"
    "                     pandas, matplotlib) or node (Node.js, no Python); needs a recipe with profiles\n"
    "  --timeout SECS     fetch: give up when the registry does not answer within SECS (default 3)\n"
    "  --tls-verify=false fetch: plain HTTP or unverified TLS (a local registry)\n"
    "  --name NAME        tree name (default: SRC's file name without .tar/.oci)\n"
    "  --max-size SIZE    refuse images that unpack to more than SIZE (default 16G)\n"
    "  --max-files N      refuse images with more than N archive entries (default 1000000)\n"
    "  --keep-setuid      keep setuid/setgid bits and file capabilities (dropped by default)\n"
    "  --source REF       what to record as the image's source (default: SRC's absolute path)\n"
    "\n"
    "Image layers are untrusted: nothing is written outside DIR/NAME, symlinks are never followed\n"
    "out of it, device nodes are skipped, every blob's sha256 and size are checked.\n";

/* "118.7 MiB": for people, unlike format_size's exact units. */
static const char *human_size(uint64_t bytes, char buf[32])
{
  static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double v = (double) bytes;
  size_t i = 0;
  while (v >= 1024 && i + 1 < ARRAY_SIZE(units)) {
    v /= 1024;
    i++;
  }
  bufprintf_cut(buf, 32, i ? "%.1f %s" : "%.0f %s", v, units[i]);
  return buf;
}

static int usage_error(const char *fmt, const char *arg)
{
  log_error(fmt, arg);
  return SBX_EXIT_SETUP;
}

/* The store: --dir, else the one exec's default rootfs is in (paths_rootfs_store). */
static int store_dir(const char *requested, char out[PATH_MAX], sbx_error_t *err)
{
  if (requested)
    return bufprintf(out, PATH_MAX, err, "%s", requested) < 0 ? sbx_error_prefix(err, "--dir") : 0;
  return paths_rootfs_store(out, err);
}

/* "python-3.14-slim.oci.tar" -> "python-3.14-slim". */
static void default_name(const char *src, char out[IMAGE_NAME_MAX + 1])
{
  /* A name that does not fit stays "", which the caller refuses (pass --name). */
  char buf[PATH_MAX];
  if (bufprintf(buf, sizeof buf, NULL, "%s", src) < 0) {
    out[0] = '\0';
    return;
  }
  size_t n = strlen(buf);
  while (n > 1 && buf[n - 1] == '/')
    buf[--n] = '\0';
  const char *base = strrchr(buf, '/') ? strrchr(buf, '/') + 1 : buf;
  if (bufprintf(out, IMAGE_NAME_MAX + 1, NULL, "%s", base) < 0)
    return;
  static const char *const exts[] = {".tar", ".oci", ".docker", ".tgz"};
  for (bool again = true; again;) {
    again = false;
    for (size_t i = 0; i < ARRAY_SIZE(exts); i++) {
      size_t l = strlen(out), e = strlen(exts[i]);
      if (l > e && !strcmp(out + l - e, exts[i])) {
        out[l - e] = '\0';
        again = true;
      }
    }
  }
}

static volatile sig_atomic_t interrupted;
static void on_signal(int sig)
{
  (void) sig;
  interrupted = 1;
}

enum {
  OPT_DIR = 256,
  OPT_NAME,
  OPT_MAX_SIZE,
  OPT_MAX_FILES,
  OPT_KEEP,
  OPT_SOURCE,
  OPT_HELP,
  OPT_PROFILE,
  OPT_FORCE,
  OPT_TIMEOUT,
  OPT_TLS_VERIFY,
};
static const struct option rootfs_options[] = {
    {"dir", required_argument, NULL, OPT_DIR},
    {"name", required_argument, NULL, OPT_NAME},
    {"max-size", required_argument, NULL, OPT_MAX_SIZE},
    {"max-files", required_argument, NULL, OPT_MAX_FILES},
    {"keep-setuid", no_argument, NULL, OPT_KEEP},
    {"source", required_argument, NULL, OPT_SOURCE},
    {"help", no_argument, NULL, OPT_HELP},
    {"profile", required_argument, NULL, OPT_PROFILE},
    {"force", no_argument, NULL, OPT_FORCE},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"tls-verify", required_argument, NULL, OPT_TLS_VERIFY},
    {NULL, 0, NULL, 0},
};

static int cmd_import(struct image_import_options *o)
{
  sbx_error_t err = {0};
  struct image_import_stats st;
  char size[32];
  /* An interrupted import cleans up after itself. */
  struct sigaction sa = {.sa_handler = on_signal};
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
  o->cancel = &interrupted;
  const char *fb = getenv("SANDBOXD_NO_OPENAT2");
  o->resolve_fallback = fb && *fb && strcmp(fb, "0");
  uint64_t start = now_ns();
  if (image_import(o, &st, &err) < 0) {
    log_sbx_error(&err);
    return 1;
  }
  uint64_t ms = (now_ns() - start) / 1000000;
  printf("imported `%s` into %s/%s: %s (%s), %u layer%s, %llu files, %llu dirs, %llu symlinks, %s in "
         "%llu.%03llus\n",
         o->src, o->store, o->name, st.manifest_digest, st.platform, st.layers, st.layers == 1 ? "" : "s",
         (unsigned long long) st.files, (unsigned long long) st.dirs, (unsigned long long) st.symlinks,
         human_size(st.bytes, size), (unsigned long long) (ms / 1000), (unsigned long long) (ms % 1000));
  printf("skipped %llu device node%s; stripped %llu setuid/setgid bit%s and %llu file capabilit%s%s\n",
         (unsigned long long) st.devices_skipped, st.devices_skipped == 1 ? "" : "s",
         (unsigned long long) st.setid_stripped, st.setid_stripped == 1 ? "" : "s",
         (unsigned long long) st.caps_stripped, st.caps_stripped == 1 ? "y" : "ies",
         o->keep_privileges ? " (kept: --keep-setuid)" : "");
  return 0;
}

static void print_line(const char *line, void *userdata)
{
  uint64_t *n = userdata;
  if ((*n)++ < 50)
    printf("%s\n", line);
}

static int cmd_verify(const char *store, const char *name)
{
  sbx_error_t err = {0};
  uint64_t diffs = 0, shown = 0;
  if (image_verify(store, name, print_line, &shown, &diffs, &err) < 0) {
    log_sbx_error(&err);
    return SBX_EXIT_SETUP;
  }
  if (diffs > shown)
    printf("... and %llu more\n", (unsigned long long) (diffs - shown));
  if (diffs) {
    printf("%s/%s: %llu difference%s from the imported image\n", store, name, (unsigned long long) diffs,
           diffs == 1 ? "" : "s");
    return 1;
  }
  printf("%s/%s: matches the imported image\n", store, name);
  return 0;
}

static int cmp_names(const void *a, const void *b)
{
  return strcmp(*(char *const *) a, *(char *const *) b);
}

static int cmd_list(const char *store)
{
  DIR *d = opendir(store);
  if (!d) {
    if (errno == ENOENT) {
      printf("no rootfs trees in %s\n", store);
      return 0;
    }
    log_error("list `%s`: %s", store, strerror(errno));
    return SBX_EXIT_SETUP;
  }
  char *names[1024];
  size_t n = 0;
  struct dirent *de;
  while ((de = readdir(d)) && n < ARRAY_SIZE(names)) {
    size_t l = strlen(de->d_name);
    if (l > 5 && !strcmp(de->d_name + l - 5, ".json") && de->d_name[0] != '.')
      names[n++] = strndup(de->d_name, l - 5);
  }
  closedir(d);
  qsort(names, n, sizeof *names, cmp_names);
  printf("%-24s %-10s %-12s %-21s %s\n", "NAME", "SIZE", "DIGEST", "IMPORTED", "SOURCE");
  size_t shown = 0;
  for (size_t i = 0; i < n; i++) {
    char path[PATH_MAX], size[32] = "-", digest[13] = "-";
    struct stat st;
    _cleanup_free_ char *data = NULL;
    size_t len;
    sbx_error_t err = {0};
    json_node_t *doc = NULL;
    if (!names[i] || bufprintf(path, sizeof path, NULL, "%s/%s", store, names[i]) < 0 ||
        stat(path, &st) < 0 || !S_ISDIR(st.st_mode))
      goto next;
    if (bufprintf(path, sizeof path, &err, "%s/%s.json", store, names[i]) < 0 ||
        read_file(path, 1u << 20, &data, &len, &err) < 0 || json_parse(data, len, &doc, &err) < 0) {
      printf("%-24s (unreadable metadata: %s)\n", names[i], err.msg);
      shown++;
      goto next;
    }
    long long bytes;
    if (json_as_int(json_get(doc, "size"), &bytes) == 0)
      human_size((uint64_t) bytes, size);
    const char *dg = json_as_string(json_get(doc, "manifest_digest"), NULL);
    if (dg && !strncmp(dg, "sha256:", 7))
      bufprintf_cut(digest, sizeof digest, "%.12s", dg + 7);
    const char *when = json_as_string(json_get(doc, "imported"), NULL);
    if (!when)
      when = json_as_string(json_get(doc, "built"), NULL);
    const char *src = json_as_string(json_get(doc, "source"), NULL);
    printf("%-24s %-10s %-12s %-21s %s\n", names[i], size, digest, when ? when : "-",
           src ? src : "(not imported: no manifest)");
    shown++;
    json_free(doc);
  next:
    free(names[i]);
  }
  if (!shown)
    printf("no rootfs trees in %s\n", store);
  return 0;
}

/* "docker.io/library/python:3.14-slim@sha256:..." -> "python-3.14-slim". */
static void name_from_image(const char *image, char out[IMAGE_NAME_MAX + 1])
{
  const char *base = strrchr(image, '/') ? strrchr(image, '/') + 1 : image;
  if (bufprintf(out, IMAGE_NAME_MAX + 1, NULL, "%s", base) < 0) {
    out[0] = '\0';
    return;
  }
  out[strcspn(out, "@")] = '\0';
  for (char *c = out; *c; c++)
    if (*c == ':')
      *c = '-';
}

static int cmd_fetch(const struct rootfs_fetch_options *fo, struct image_import_options *o)
{
  sbx_error_t err = {0};
  struct rootfs_fetched f = {0};
  if (rootfs_fetch_pull(fo, &f, &err) < 0) {
    log_sbx_error(&err);
    return 1;
  }
  o->src = f.layout;
  o->source_ref = f.source;
  int rc = cmd_import(o);
  rootfs_fetched_free(&f);
  return rc;
}

static int cmd_remove(const char *store, const char *name)
{
  sbx_error_t err = {0};
  if (image_remove(store, name, &err) < 0) {
    log_sbx_error(&err);
    return err.errnum == ENOENT ? SBX_EXIT_SETUP : 1;
  }
  printf("removed %s/%s\n", store, name);
  return 0;
}

/* What rootfs's options and arguments say, for its subcommand. */
struct rootfs_args {
  struct image_import_options o; /* import and fetch: --max-size, --max-files, --keep-setuid, --source */
  const char *dir, *profile;
  char name[IMAGE_NAME_MAX + 1];
  bool force, tls_verify;
  uint64_t timeout_ms;
  char store[PATH_MAX];
  char **rest; /* what follows the subcommand, options taken out */
  int nrest;
};

/* One option into a: 0, the exit status of its usage error, or -1: not an option of rootfs. */
static int rootfs_option(int c, const char *arg, struct rootfs_args *a)
{
  switch (c) {
  case OPT_DIR:
    a->dir = arg;
    return 0;
  case OPT_NAME:
    if (strlen(arg) > IMAGE_NAME_MAX || !image_name_valid(arg) ||
        bufprintf(a->name, sizeof a->name, NULL, "%s", arg) < 0)
      return usage_error("--name `%s`: use letters, digits, `.`, `_` and `-` (at most 128)", arg);
    return 0;
  case OPT_MAX_SIZE:
    if (parse_size(arg, &a->o.max_bytes) < 0 || !a->o.max_bytes)
      return usage_error("--max-size `%s`: not a size like 512M or 4G", arg);
    return 0;
  case OPT_MAX_FILES:
    if (parse_u64(arg, &a->o.max_files) < 0 || !a->o.max_files)
      return usage_error("--max-files `%s`: not a positive number", arg);
    return 0;
  case OPT_KEEP:
    a->o.keep_privileges = true;
    return 0;
  case OPT_SOURCE:
    a->o.source_ref = arg;
    return 0;
  case OPT_PROFILE:
    if (strcmp(arg, "slim") && strcmp(arg, "data") && strcmp(arg, "node"))
      return usage_error("--profile `%s`: slim, data or node", arg);
    a->profile = arg;
    return 0;
  case OPT_FORCE:
    a->force = true;
    return 0;
  case OPT_TIMEOUT:
    if (parse_duration_ms(arg, &a->timeout_ms) < 0 || !a->timeout_ms || a->timeout_ms > 600000)
      return usage_error("--timeout `%s`: seconds, more than 0 and at most 600", arg);
    return 0;
  case OPT_TLS_VERIFY:
    if (strcmp(arg, "true") && strcmp(arg, "false"))
      return usage_error("--tls-verify=`%s`: true or false", arg);
    a->tls_verify = !strcmp(arg, "true");
    return 0;
  default:
    return -1;
  }
}

/* ------------------------------------------------------------------ the subcommands */

static int sub_import(struct rootfs_args *a)
{
  if (a->nrest != 1)
    return usage_error("%s", "usage: sandboxd rootfs import SRC [--name NAME] (see sandboxd rootfs --help)");
  a->o.src = a->rest[0];
  if (!a->name[0]) {
    default_name(a->o.src, a->name);
    if (!image_name_valid(a->name))
      return usage_error("cannot derive a rootfs name from `%s`: pass --name NAME", a->o.src);
  }
  a->o.name = a->name;
  a->o.store = a->store;
  return cmd_import(&a->o);
}

static int sub_list(struct rootfs_args *a)
{
  if (a->nrest != 0)
    return usage_error("%s", "usage: sandboxd rootfs list [--dir DIR]");
  return cmd_list(a->store);
}

static int sub_verify(struct rootfs_args *a)
{
  if (a->nrest != 1)
    return usage_error("%s", "usage: sandboxd rootfs verify NAME [--dir DIR]");
  return cmd_verify(a->store, a->rest[0]);
}

static int sub_build(struct rootfs_args *a)
{
  if (a->nrest != 0)
    return usage_error("%s",
                       "usage: sandboxd rootfs build [--profile slim|data|node] [--name NAME] [--dir DIR]");
  char def[IMAGE_NAME_MAX + 1];
  if (!strcmp(a->profile, "node"))
    bufprintf_cut(def, sizeof def, "%s", "node-slim");
  else
    bufprintf_cut(def, sizeof def, "python-3.14-%s", a->profile);
  struct rootfs_build_options bo = {
      .store = a->store, .name = a->name[0] ? a->name : def, .profile = a->profile, .force = a->force};
  return rootfs_build(&bo);
}

static int sub_fetch(struct rootfs_args *a)
{
  if (a->nrest > 1)
    return usage_error("%s",
                       "usage: sandboxd rootfs fetch [IMAGE] [--name NAME] (see sandboxd rootfs --help)");
  const char *image = a->nrest ? a->rest[0] : ROOTFS_FETCH_DEFAULT_IMAGE;
  if (!strncmp(image, "docker://", 9))
    image += 9;
  if (!*image || strchr(image, ' ') || strstr(image, "://") || image[0] == '-')
    return usage_error("rootfs fetch: `%s` is not an image reference like HOST/NAME:TAG", image);
  if (!a->name[0]) {
    name_from_image(image, a->name);
    if (!image_name_valid(a->name))
      return usage_error("cannot derive a rootfs name from `%s`: pass --name NAME", image);
  }
  struct rootfs_fetch_options fo = {.image = image,
                                    .store = a->store,
                                    .name = a->name,
                                    .tls_verify = a->tls_verify,
                                    .timeout_ms = (unsigned) a->timeout_ms};
  a->o.name = a->name;
  a->o.store = a->store;
  return cmd_fetch(&fo, &a->o);
}

static int sub_remove(struct rootfs_args *a)
{
  if (a->nrest != 1)
    return usage_error("%s", "usage: sandboxd rootfs remove NAME [--dir DIR]");
  if (!image_name_valid(a->rest[0]))
    return usage_error("rootfs remove `%s`: not a rootfs name (letters, digits, `.`, `_`, `-`; no `/`)",
                       a->rest[0]);
  return cmd_remove(a->store, a->rest[0]);
}

static const struct {
  const char *name;
  int (*run)(struct rootfs_args *a);
} subcommands[] = {
    {"import", sub_import}, {"list", sub_list},   {"verify", sub_verify},
    {"build", sub_build},   {"fetch", sub_fetch}, {"remove", sub_remove},
};

int cmd_rootfs(int argc, char **argv)
{
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    fputs(rootfs_usage, argc < 2 ? stderr : stdout);
    return argc < 2 ? SBX_EXIT_SETUP : 0;
  }
  const char *sub = argv[1];
  struct rootfs_args a = {.profile = "slim", .tls_verify = true, .timeout_ms = ROOTFS_FETCH_TIMEOUT_MS};
  int c;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc - 1, argv + 1, "h", rootfs_options, NULL)) != -1) {
    if (c == 'h' || c == OPT_HELP) {
      fputs(rootfs_usage, stdout);
      return 0;
    }
    int r = rootfs_option(c, optarg, &a);
    if (r < 0)
      return usage_error("rootfs: unknown or incomplete option `%s` (see sandboxd rootfs --help)",
                         argv[optind] ? argv[optind] : "");
    if (r > 0)
      return r;
  }
  a.rest = argv + 1 + optind;
  a.nrest = argc - 1 - optind;
  sbx_error_t err;
  if (store_dir(a.dir, a.store, &err) < 0)
    return usage_error("%s", err.msg);
  for (size_t i = 0; i < ARRAY_SIZE(subcommands); i++)
    if (!strcmp(sub, subcommands[i].name))
      return subcommands[i].run(&a);
  return usage_error("rootfs: unknown subcommand `%s` (build, fetch, import, list, verify, remove)", sub);
}
