/* SPDX-License-Identifier: Apache-2.0 */
/* The languages (lang.h): the one table. A language's rootfs is named here and nowhere else;
 * exec uses it when --rootfs is not given, and so does the MCP server's execute_code. */
#include "run/lang.h"

#include <stddef.h>
#include <string.h>

#include "base/util.h"

static const struct sbx_lang langs[] = {
    {.name = "python", .program = "python3", .extensions = {".py", NULL}},
    /* bash is in every Debian image (Essential: yes), so the default rootfs serves. */
    {.name = "bash", .program = "bash", .extensions = {".sh", ".bash", NULL}},
    {.name = "javascript",
     .program = "node",
     .rootfs = "node-slim",
     .build_hint = "build it with `make rootfs-node`",
     .installed_hint = "build it with `sandboxd rootfs build --profile node`",
     .extensions = {".js", ".mjs", NULL}},
};

const struct sbx_lang *lang_by_name(const char *name)
{
  for (size_t i = 0; i < ARRAY_SIZE(langs); i++)
    if (!strcmp(langs[i].name, name))
      return &langs[i];
  return NULL;
}

const struct sbx_lang *lang_by_file(const char *path)
{
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  const char *dot = strrchr(base, '.');
  /* ".py" alone is a hidden file's name, not an extension. */
  if (!dot || dot == base)
    return NULL;
  for (size_t i = 0; i < ARRAY_SIZE(langs); i++)
    for (const char *const *e = langs[i].extensions; *e; e++)
      if (!strcmp(dot, *e))
        return &langs[i];
  return NULL;
}

const struct sbx_lang *lang_by_program(const char *program)
{
  const char *base = strrchr(program, '/');
  base = base ? base + 1 : program;
  /* python3 and its versioned names (python3.14); sh is bash's for the rootfs it picks. */
  if (!strcmp(base, "python") || !strcmp(base, "python3") || !strncmp(base, "python3.", 8))
    return lang_by_name("python");
  if (!strcmp(base, "bash") || !strcmp(base, "sh"))
    return lang_by_name("bash");
  if (!strcmp(base, "node") || !strcmp(base, "nodejs"))
    return lang_by_name("javascript");
  return NULL;
}

const char *lang_names(void)
{
  return "python|bash|javascript";
}
