/* SPDX-License-Identifier: Apache-2.0 */
#include "cli/hostfacts.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

long hf_number(const char *text)
{
  if (!text)
    return -1;
  char *end;
  long v = strtol(text, &end, 10);
  return end == text || v < 0 ? -1 : v;
}

bool hf_apparmor_enabled(const char *text)
{
  return text && text[0] == 'Y';
}

/* The line of text starting at key (which ends in ':'), or NULL. */
static const char *field(const char *text, const char *key)
{
  size_t n = strlen(key);
  for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
    if (!strncmp(p, key, n))
      return p + n;
  return NULL;
}

bool hf_apparmor_loaded(const char *profiles, const char *name)
{
  size_t n = strlen(name);
  for (const char *p = profiles; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
    if (!strncmp(p, name, n) && p[n] == ' ' && p[n + 1] == '(')
      return true;
  return false;
}

int hf_apparmor_label(const char *text, char *buf, size_t len)
{
  if (!text)
    return -1;
  size_t n = strcspn(text, " \n");
  if (n == 0 || n >= len)
    return -1;
  memcpy(buf, text, n);
  buf[n] = 0;
  return 0;
}

int hf_seccomp_mode(const char *status)
{
  const char *v = status ? field(status, "Seccomp:") : NULL;
  return v ? (int) hf_number(v + strspn(v, " \t")) : -1;
}

bool hf_cap_effective(const char *status, int cap)
{
  const char *v = status ? field(status, "CapEff:") : NULL;
  if (!v || cap < 0 || cap > 63)
    return false;
  return (strtoull(v + strspn(v, " \t"), NULL, 16) >> cap) & 1;
}

/* Whether line l (up to its newline) contains s. */
static bool line_has(const char *l, const char *s)
{
  const char *e = strchr(l, '\n');
  size_t n = e ? (size_t) (e - l) : strlen(l), m = strlen(s);
  for (size_t i = 0; i + m <= n; i++)
    if (!memcmp(l + i, s, m))
      return true;
  return false;
}

/* Field i (0-based, space-separated) of mountinfo line l, into buf. */
static bool mi_field(const char *l, int i, char *buf, size_t len)
{
  for (; i > 0; i--) {
    l += strcspn(l, " \n");
    if (*l != ' ')
      return false;
    l++;
  }
  size_t n = strcspn(l, " \n");
  if (n >= len)
    return false;
  memcpy(buf, l, n);
  buf[n] = 0;
  return true;
}

const char *hf_container(bool dockerenv, bool containerenv, const char *container_env, const char *cgroup,
                         const char *mountinfo, const char *pid1_comm, const char **ret_why)
{
  static const struct {
    const char *hint, *kind;
  } cg[] = {{"/docker/", "docker"}, {"/docker-", "docker"},      {"/libpod-", "podman"},
            {"/libpod/", "podman"}, {"/kubepods", "kubernetes"}, {"/lxc/", "lxc"},
            {"/lxc.payload", "lxc"}};
  if (dockerenv)
    return *ret_why = "/.dockerenv", "docker";
  if (containerenv)
    return *ret_why = "/run/.containerenv", "podman";
  if (container_env && *container_env)
    return *ret_why = "$container", container_env;
  for (const char *l = cgroup; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
    for (size_t i = 0; i < sizeof cg / sizeof *cg; i++)
      if (line_has(l, cg[i].hint))
        return *ret_why = "/proc/self/cgroup", cg[i].kind;
  char mp[8];
  for (const char *l = mountinfo; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
    if (mi_field(l, 4, mp, sizeof mp) && !strcmp(mp, "/")) {
      if (line_has(l, "/var/lib/docker/"))
        return *ret_why = "the root mount", "docker";
      if (line_has(l, "/var/lib/containers/"))
        return *ret_why = "the root mount", "podman";
    }
  static const char *const inits[] = {"docker-init", "tini", "dumb-init", "catatonit"};
  for (size_t i = 0; pid1_comm && i < sizeof inits / sizeof *inits; i++)
    if (!strncmp(pid1_comm, inits[i], strlen(inits[i])) && strchr("\n", pid1_comm[strlen(inits[i])]))
      return *ret_why = "PID 1's name", "container";
  return NULL;
}

int hf_proc_overmount(const char *mountinfo, char *buf, size_t len)
{
  char mp[PATH_MAX];
  for (const char *l = mountinfo; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
    if (!mi_field(l, 4, mp, sizeof mp) || strncmp(mp, "/proc/", 6))
      continue;
    /* binfmt_misc: mounted on an empty directory proc made for it, which the kernel allows. */
    if (!strcmp(mp, "/proc/sys/fs/binfmt_misc"))
      continue;
    bufprintf_cut(buf, len, "%s", mp);
    return 1;
  }
  return 0;
}
