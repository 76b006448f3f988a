/* Unit tests for src/run/artifacts.c: sniffing, name checks, URI encoding, and the walk over a
 * temporary directory standing in for the workspace (here a FIFO can be made, which seccomp
 * refuses inside a sandbox). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/json.h"
#include "check.h"
#include "run/artifacts.h"

static const struct artifact *find(const struct artifacts *a, const char *path)
{
  for (size_t i = 0; i < a->n; i++)
    if (!strcmp(a->v[i].path, path))
      return &a->v[i];
  return NULL;
}

static void put(int dirfd, const char *name, const char *data, size_t len)
{
  int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd >= 0) {
    if (len && write(fd, data, len) != (ssize_t) len)
      fprintf(stderr, "short write\n");
    close(fd);
  }
}

static void test_sniff(void)
{
  bool img, txt;
  static const unsigned char png[] = "\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
  CHECK(!strcmp(artifact_sniff("x.txt", png, sizeof png - 1, &img, &txt), "image/png") && img && !txt);
  CHECK(
      !strcmp(artifact_sniff("a", (const unsigned char *) "\xff\xd8\xff\xe0", 4, &img, &txt), "image/jpeg") &&
      img);
  CHECK(!strcmp(artifact_sniff("a", (const unsigned char *) "GIF89a..", 8, &img, &txt), "image/gif") && img);
  CHECK(!strcmp(artifact_sniff("a", (const unsigned char *) "RIFF\x10\0\0\0WEBPVP8 ", 16, &img, &txt),
                "image/webp") &&
        img);
  /* WEBP at 8 without RIFF first is not WebP; a truncated PNG signature is not PNG. */
  CHECK(!strcmp(artifact_sniff("a", (const unsigned char *) "XXXX\x10\0\0\0WEBP", 12, &img, &txt),
                "application/octet-stream") &&
        !img);
  CHECK(!img && !strcmp(artifact_sniff("a.png", png, 7, &img, &txt), "application/octet-stream"));
  /* Text: valid UTF-8 without NUL, typed by the name. */
  CHECK(!strcmp(artifact_sniff("t.CSV", (const unsigned char *) "a,b\n", 4, &img, &txt), "text/csv") && txt &&
        !img);
  CHECK(!strcmp(artifact_sniff("t.json", (const unsigned char *) "{}", 2, &img, &txt), "application/json"));
  CHECK(!strcmp(artifact_sniff("notes", (const unsigned char *) "h\xc3\xa9", 3, &img, &txt), "text/plain") &&
        txt);
  CHECK(!strcmp(artifact_sniff("t.csv", (const unsigned char *) "a\0b", 3, &img, &txt),
                "application/octet-stream") &&
        !txt);
  CHECK(!strcmp(artifact_sniff("t.txt", (const unsigned char *) "\xc3(", 2, &img, &txt),
                "application/octet-stream") &&
        !txt);
  /* A name that says PNG is not an image. */
  CHECK(!strcmp(artifact_sniff("fake.png", (const unsigned char *) "hello", 5, &img, &txt), "text/plain") &&
        !img);
  CHECK(!strcmp(artifact_sniff("x", (const unsigned char *) "%PDF-1.7", 8, &img, &txt), "application/pdf"));
  CHECK(!strcmp(artifact_sniff("empty", (const unsigned char *) "", 0, &img, &txt), "text/plain") && txt);
}

static void test_names(void)
{
  CHECK(artifact_name_problem("plot.png", 8) == NULL);
  CHECK(artifact_name_problem("...", 3) == NULL);
  CHECK(artifact_name_problem("r\xc3\xa9sum\xc3\xa9", 8) == NULL);
  CHECK(artifact_name_problem(".", 1) != NULL && artifact_name_problem("..", 2) != NULL);
  CHECK(strstr(artifact_name_problem("a\nb", 3), "control"));
  CHECK(strstr(artifact_name_problem("a\x7f", 2), "control"));
  CHECK(strstr(artifact_name_problem("a\x1b[0m", 5), "control"));
  CHECK(strstr(artifact_name_problem("bad\xff", 4), "UTF-8"));
  CHECK(strstr(artifact_name_problem("\xc0\xaf", 2), "UTF-8"));     /* overlong '/' */
  CHECK(strstr(artifact_name_problem("\xed\xa0\x80", 3), "UTF-8")); /* a surrogate */
}

static void test_uri(void)
{
  strbuf_t sb = {0};
  CHECK(artifact_uri_append(&sb, "/tmp/out dir/r\xc3\xa9sultat #1?.csv") == 0);
  CHECK(sb.data && !strcmp(sb.data, "/tmp/out%20dir/r%C3%A9sultat%20%231%3F.csv"));
  strbuf_free(&sb);
  CHECK(artifact_uri_append(&sb, "a-b_c.d~e/%") == 0 && !strcmp(sb.data, "a-b_c.d~e/%25"));
  strbuf_free(&sb);
}

static void test_walk(void)
{
  char tmpl[] = "/tmp/sandboxd-test-artifacts-XXXXXX";
  char *ws = mkdtemp(tmpl);
  CHECK(ws != NULL);
  if (!ws)
    return;
  int wfd = open(ws, O_PATH | O_DIRECTORY | O_CLOEXEC);
  /* No workspace: nothing to collect. No out: the careful way, which says why. */
  CHECK(artifacts_out_empty(-1));
  CHECK(wfd >= 0 && !artifacts_out_empty(wfd));
  struct artifacts a;
  sbx_error_t err = {0};
  CHECK(artifacts_collect(wfd, 16, 1 << 20, &a, &err) == 0 && a.n == 0 && a.problem);
  artifacts_free(&a);
  CHECK(mkdirat(wfd, "out", 0755) == 0);
  int out = openat(wfd, "out", O_PATH | O_DIRECTORY | O_CLOEXEC);
  /* Not tmpfs, so the one-fstatat fast path cannot say "empty": it says "look". */
  CHECK(artifacts_collect(wfd, 16, 1 << 20, &a, &err) == 0 && a.n == 0 && !a.problem);
  artifacts_free(&a);

  put(out, "a.txt", "hello", 5);
  put(out, "b.bin", "\0\1\2", 3);
  CHECK(mkfifoat(out, "fifo", 0644) == 0);
  CHECK(symlinkat("/etc/passwd", out, "link") == 0);
  CHECK(mkdirat(out, "d", 0755) == 0);
  int d = openat(out, "d", O_PATH | O_DIRECTORY | O_CLOEXEC);
  put(d, "inner.csv", "x,y\n", 4);
  /* Sparse and huge: omitted by its size, never read. */
  int big = openat(out, "sparse", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  CHECK(big >= 0 && ftruncate(big, 1LL << 40) == 0);
  close(big);
  /* Deeper than the bound. */
  int cur = dup(out);
  for (int i = 0; i <= ARTIFACT_MAX_DEPTH; i++) {
    mkdirat(cur, "z", 0755);
    int next = openat(cur, "z", O_PATH | O_DIRECTORY | O_CLOEXEC);
    close(cur);
    cur = next;
  }
  put(cur, "deep", "x", 1);
  close(cur);

  CHECK(artifacts_collect(wfd, 16, 1 << 20, &a, &err) == 0);
  const struct artifact *e = find(&a, "a.txt");
  CHECK(e && e->data && e->size == 5 && e->text && !strcmp(e->mime, "text/plain") &&
        !strcmp(e->sha256, "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"));
  CHECK((e = find(&a, "b.bin")) && e->data && !e->text && !strcmp(e->mime, "application/octet-stream"));
  CHECK((e = find(&a, "d/inner.csv")) && e->data && !strcmp(e->mime, "text/csv"));
  CHECK((e = find(&a, "fifo")) && !e->data && !strcmp(e->omitted, "FIFO, not read"));
  CHECK((e = find(&a, "link")) && !e->data && !strcmp(e->omitted, "symlink, not followed"));
  CHECK((e = find(&a, "sparse")) && !e->data && e->size == 1ULL << 40 &&
        !strcmp(e->omitted, "artifact_limit"));
  /* z/z/.../z (16 levels looked into), its 17th directory not. */
  char deep[2 * ARTIFACT_MAX_DEPTH + 2] = "z";
  for (int i = 1; i <= ARTIFACT_MAX_DEPTH; i++)
    strcat(deep, "/z");
  CHECK((e = find(&a, deep)) && !strcmp(e->omitted, "directory too deep, not looked into"));
  CHECK(a.returned == 3 && a.bytes == 12 && !a.scan_stopped);
  /* Sorted: the order is the names', not the directory's. */
  CHECK(a.n >= 2 && strcmp(a.v[0].path, a.v[1].path) < 0);

  /* The content blocks and the files list. */
  json_writer_t *w = json_writer_new();
  json_arr_begin(w);
  artifacts_write_blocks(w, &a, true);
  json_arr_end(w);
  size_t len;
  const char *j = json_writer_buf(w, &len);
  CHECK(strstr(j, "\"uri\":\"sandboxd://workspace/out/d/inner.csv\"") && strstr(j, "\"text\":\"hello\""));
  CHECK(!strstr(j, "resource_link") && !strstr(j, "b.bin")); /* binary, unsaved: listed only */
  json_writer_free(w);
  w = json_writer_new();
  json_obj_begin(w);
  artifacts_write_files(w, &a);
  json_obj_end(w);
  j = json_writer_buf(w, &len);
  CHECK(strstr(j, "{\"path\":\"link\",\"size\":0,\"omitted\":\"symlink, not followed\"}"));
  json_writer_free(w);
  artifacts_free(&a);

  /* max_artifacts 1, and 4 bytes: the first file in name order, then the limits. */
  CHECK(artifacts_collect(wfd, 1, 4, &a, &err) == 0);
  CHECK(a.returned == 0 || (a.returned == 1 && a.bytes <= 4));
  CHECK((e = find(&a, "a.txt")) && !strcmp(e->omitted, "artifact_limit"));
  CHECK((e = find(&a, "b.bin")) && e->data);
  CHECK((e = find(&a, "d/inner.csv")) && !strcmp(e->omitted, "max_artifacts"));
  artifacts_free(&a);

  /* The host copy: under a fresh directory, never through what is there. */
  char saved[] = "/tmp/sandboxd-test-saved-XXXXXX";
  CHECK(mkdtemp(saved) != NULL);
  int sfd = open(saved, O_PATH | O_DIRECTORY | O_CLOEXEC);
  CHECK(symlinkat("/nonexistent-target", sfd, "a.txt") == 0); /* planted: must not be written through */
  CHECK(artifacts_collect(wfd, 16, 1 << 20, &a, &err) == 0);
  artifacts_save(&a, sfd, saved);
  CHECK((e = find(&a, "a.txt")) && !e->data && !e->uri && strstr(e->omitted, "already saved"));
  CHECK((e = find(&a, "d/inner.csv")) && e->uri && strstr(e->uri, "file:///tmp/sandboxd-test-saved-") &&
        strstr(e->uri, "/d/inner.csv"));
  CHECK(access("/nonexistent-target", F_OK) < 0);
  char buf[16] = {0};
  int rf = openat(sfd, "d/inner.csv", O_RDONLY | O_CLOEXEC);
  CHECK(rf >= 0 && read(rf, buf, sizeof buf) == 4 && !strcmp(buf, "x,y\n"));
  if (rf >= 0)
    close(rf);
  strbuf_t note = {0};
  CHECK(artifacts_note(&a, saved, true, &note) == 0 &&
        strstr(note.data, "saved in /tmp/sandboxd-test-saved-") && strstr(note.data, "not returned"));
  strbuf_free(&note);
  artifacts_free(&a);

  /* out replaced by a link: nothing collected, and why. */
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf '%s/out' && ln -s / '%s/out'", ws, ws);
  CHECK(system(cmd) == 0);
  CHECK(!artifacts_out_empty(wfd));
  CHECK(artifacts_collect(wfd, 16, 1 << 20, &a, &err) == 0 && a.n == 0 && a.problem);
  artifacts_free(&a);

  snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", ws, saved);
  CHECK(system(cmd) == 0);
  close(sfd);
  close(d);
  close(out);
  close(wfd);
}

int main(void)
{
  test_sniff();
  test_names();
  test_uri();
  test_walk();
  return check_summary("test_artifacts");
}
