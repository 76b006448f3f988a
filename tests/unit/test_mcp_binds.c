/* Unit tests for the client's roots: file:// URIs and mount names (src/mcp/mcp_binds.c). */
#include <limits.h>
#include <string.h>

#include "check.h"
#include "mcp/mcp_binds.h"

static const char *path_of(const char *uri)
{
  static char path[PATH_MAX];
  const char *why = NULL;
  return root_uri_path(uri, path, sizeof path, &why) == 0 ? path : why;
}

int main(void)
{
  CHECK(strcmp(path_of("file:///home/u/proj"), "/home/u/proj") == 0);
  CHECK(strcmp(path_of("FILE://localhost/home/u/proj/"), "/home/u/proj") == 0);
  CHECK(strcmp(path_of("file:///a%20b/%C3%A9"), "/a b/\xc3\xa9") == 0);
  CHECK(strcmp(path_of("https://example.com/x"), "not a file:// URI") == 0);
  CHECK(strcmp(path_of("file:relative"), "not a file:// URI") == 0);
  CHECK(strcmp(path_of("file://host"), "no path") == 0);
  CHECK(strcmp(path_of("file://otherhost/tmp"), "not a local file (a host in the URI)") == 0);
  CHECK(strcmp(path_of("file:///tmp?x"), "a query or fragment in the URI") == 0);
  CHECK(strcmp(path_of("file:///tmp#x"), "a query or fragment in the URI") == 0);
  CHECK(strcmp(path_of("file:///tmp%00x"), "an escaped NUL or slash") == 0);
  CHECK(strcmp(path_of("file:///a%2fb"), "an escaped NUL or slash") == 0);
  CHECK(strcmp(path_of("file:///a%2"), "a bad percent-escape") == 0);
  CHECK(strcmp(path_of("file:///a%zz"), "a bad percent-escape") == 0);
  CHECK(strcmp(path_of("file:///a/../etc"), "`.`, `..` or an empty component") == 0);
  CHECK(strcmp(path_of("file:///a/%2E%2E/etc"), "`.`, `..` or an empty component") == 0);
  CHECK(strcmp(path_of("file:///a//b"), "`.`, `..` or an empty component") == 0);
  CHECK(strcmp(path_of("file:///"), "the host's / is never bound") == 0);
  static char longuri[PATH_MAX + 64] = "file:///";
  memset(longuri + 8, 'a', PATH_MAX + 8);
  CHECK(strcmp(path_of(longuri), "the path is too long") == 0);

  struct mcp_root taken[3] = {{.name = "proj"}, {.name = "proj-2"}, {.name = "root"}};
  char name[ROOT_NAME_MAX + 8];
  root_name("/x/proj", taken, 0, name);
  CHECK(strcmp(name, "proj") == 0);
  root_name("/y/proj", taken, 2, name);
  CHECK(strcmp(name, "proj-3") == 0);
  root_name("/y/.hidden dir\n", taken, 0, name);
  CHECK(strcmp(name, "_hidden_dir_") == 0);
  root_name("/y/\xc3\xa9t\xc3\xa9", taken, 0, name);
  CHECK(strcmp(name, "__t__") == 0);
  root_name("/", taken, 3, name);
  CHECK(strcmp(name, "root-2") == 0);
  char longname[200];
  memset(longname, 'n', sizeof longname - 1);
  longname[0] = '/';
  longname[sizeof longname - 1] = '\0';
  root_name(longname, taken, 0, name);
  CHECK(strlen(name) == ROOT_NAME_MAX);
  return check_summary("test_mcp_binds");
}
