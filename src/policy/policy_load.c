/* SPDX-License-Identifier: Apache-2.0 */
/* Finding and reading policy files: a name through the search path ($SANDBOXD_POLICY_DIR, then
 * beside the binary, then /etc/sandboxd/policy), or a path. The text goes to the parser (policy.c). */
#include "policy/policy.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/paths.h"
#include "base/util.h"

int policy_load_file(const char *path, struct sbx_policy **ret, sbx_error_t *err)
{
  _cleanup_free_ char *text = NULL;
  if (read_file(path, SBX_POLICY_MAX_BYTES, &text, NULL, err) < 0)
    return -1;
  _cleanup_free_ char *dir = strdup(path);
  if (!dir)
    return sbx_error_set(err, ENOMEM, "policy");
  char *slash = strrchr(dir, '/');
  if (slash == dir)
    dir[1] = '\0';
  else if (slash)
    *slash = '\0';
  else
    strcpy(dir, ".");
  return policy_parse_string(text, path, dir, ret, err);
}

static char search_path[PATH_MAX * 3];

const char *policy_search_path(void)
{
  if (search_path[0])
    return search_path;
  /* Too long, it stays "" (never a cut directory): policy_load says so. */
  if (paths_policy_search(search_path, sizeof search_path, NULL) < 0)
    return "";
  return search_path;
}

static int load_whole(const char *path, struct sbx_policy **ret, sbx_error_t *err)
{
  if (policy_load_file(path, ret, err) < 0)
    return -1;
  if (!(*ret)->sha256[0]) {
    policy_free(*ret);
    return sbx_error_set(err, 0, "`%s` is a fragment for `include`, not a policy", path);
  }
  /* Not root, the user namespace may be a right the binary has and its caller lacks (policy.h):
   * here, where every command gets its policy, so what runs and what `policy show` prints agree. */
  if (geteuid() != 0 && policy_apply_floor(*ret, err) < 0) {
    policy_free(*ret);
    return sbx_error_prefix(err, "policy `%s`", path);
  }
  return 0;
}

int policy_load(const char *name_or_path, struct sbx_policy **ret, sbx_error_t *err)
{
  const char *name = name_or_path ? name_or_path : "default";
  size_t len = strlen(name);
  if (strchr(name, '/') || (len > 7 && strcmp(name + len - 7, ".policy") == 0) ||
      (len > 4 && strcmp(name + len - 4, ".inc") == 0))
    return load_whole(name, ret, err);
  for (const char *c = name; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-' || *c == '_'))
      return sbx_error_set(err, 0, "policy name `%s`: use a name like `default` or a path", name);
  if (!*policy_search_path())
    return sbx_error_set(err, ENAMETOOLONG,
                         "policy `%s`: the policy search path ($SANDBOXD_POLICY_DIR) is too long", name);
  _cleanup_free_ char *paths = strdup(policy_search_path());
  if (!paths)
    return sbx_error_set(err, ENOMEM, "policy");
  char *save = NULL;
  for (char *dir = strtok_r(paths, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
    char path[PATH_MAX];
    if (bufprintf(path, sizeof path, NULL, "%s/%s.policy", dir, name) == 0 && access(path, F_OK) == 0)
      return load_whole(path, ret, err);
  }
  return sbx_error_set(err, ENOENT, "policy `%s` not found in %s", name, policy_search_path());
}
