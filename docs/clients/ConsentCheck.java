// Ask the consent sidecar whether an operation is allowed. Java 17, the JDK only: java.net.http over
// TCP; over a Unix socket, which java.net.http cannot reach, one HTTP/1.1 exchange on a SocketChannel.
//
//   java ConsentCheck.java http://127.0.0.1:7700 alice marketing-email [timeout_ms]
//   java ConsentCheck.java unix:/var/run/cs/decision.sock alice marketing-email
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.URI;
import java.net.UnixDomainSocketAddress;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;

public final class ConsentCheck {
  /** allowed only for a 200 whose body is exactly {"decision":"ALLOW","configKey":<asked>,"validUntil":<integer epoch ms, in the future>}. */
  public record Result(boolean allowed, String kind, String cause, long validUntil) {}

  private record Answer(int status, String contentType, byte[] body) {}

  private static final int MAX_BODY = 65536;
  // One client, kept-alive connections; it never follows a redirect.
  private static final HttpClient HTTP = HttpClient.newBuilder().followRedirects(HttpClient.Redirect.NEVER).connectTimeout(Duration.ofSeconds(2)).build();

  public static Result check(String baseUrl, String userReference, String configKey, Duration timeout) {
    String body = "{\"userReference\":" + quote(userReference) + ",\"configKey\":" + quote(configKey) + "}";
    Answer a;
    try {
      a = baseUrl.startsWith("unix:") ? overSocket(baseUrl.substring(5), body, timeout) : overTcp(baseUrl, body, timeout);
    } catch (Exception e) {
      return new Result(false, "unavailable", e.getClass().getSimpleName(), 0);
    }
    if (a.body() == null) return new Result(false, "unexpected_answer", "body_too_large", 0);
    Map<String, Object> doc = flatObject(a.body());
    if (a.status() == 503) return new Result(false, "no_decision", doc != null && doc.get("error") instanceof String s ? s : "unspecified", 0);
    if (a.status() == 400) return new Result(false, "invalid_request", "invalid_request", 0);
    if (a.status() != 200) return new Result(false, "unexpected_answer", "status " + a.status(), 0);
    if (!a.contentType().split(";")[0].trim().equalsIgnoreCase("application/json") || doc == null) return new Result(false, "unexpected_answer", "not_json", 0);
    if ("ALLOW".equals(doc.get("decision")) && doc.keySet().equals(java.util.Set.of("decision", "configKey", "validUntil"))) {
      if (!configKey.equals(doc.get("configKey"))) return new Result(false, "unexpected_answer", "other_config_key", 0);
      if (!(doc.get("validUntil") instanceof Long v) || v <= 0 || v > (1L << 53) - 1) return new Result(false, "unexpected_answer", "malformed", 0);
      if (v <= System.currentTimeMillis()) return new Result(false, "unexpected_answer", "expired", 0);
      return new Result(true, "allow", "", v);
    }
    if ("DENY".equals(doc.get("decision")) && doc.keySet().equals(java.util.Set.of("decision", "configKey")) && configKey.equals(doc.get("configKey"))) {
      return new Result(false, "deny", "evaluated", 0);
    }
    if ("DENY".equals(doc.get("decision")) && doc.keySet().equals(java.util.Set.of("decision", "reason")) && doc.get("reason") instanceof String r && !r.isEmpty()) {
      return new Result(false, "deny", r, 0);
    }
    return new Result(false, "unexpected_answer", "malformed", 0);
  }

  private static Answer overTcp(String baseUrl, String body, Duration timeout) throws Exception {
    HttpRequest req = HttpRequest.newBuilder(URI.create(baseUrl + "/v1/authorization/check")).header("content-type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build();
    // A body is read only when it declares a length within the cap; the whole exchange has one deadline.
    HttpResponse<byte[]> res = HTTP.sendAsync(req, info -> info.headers().firstValueAsLong("content-length").orElse(-1) >= 0 && info.headers().firstValueAsLong("content-length").getAsLong() <= MAX_BODY
        ? HttpResponse.BodySubscribers.ofByteArray() : HttpResponse.BodySubscribers.replacing(null)).get(timeout.toMillis(), TimeUnit.MILLISECONDS);
    return new Answer(res.statusCode(), res.headers().firstValue("content-type").orElse(""), res.body());
  }

  private static Answer overSocket(String path, String body, Duration timeout) throws IOException {
    byte[] json = body.getBytes(StandardCharsets.UTF_8);
    String head = "POST /v1/authorization/check HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: " + json.length + "\r\nconnection: close\r\n\r\n";
    long deadline = System.nanoTime() + timeout.toNanos();
    ByteArrayOutputStream got = new ByteArrayOutputStream();
    try (SocketChannel ch = SocketChannel.open(StandardProtocolFamily.UNIX); Selector selector = Selector.open()) {
      ch.connect(UnixDomainSocketAddress.of(path));
      ch.write(ByteBuffer.wrap((head + body).getBytes(StandardCharsets.UTF_8)));
      ch.configureBlocking(false);
      ch.register(selector, SelectionKey.OP_READ);
      ByteBuffer buf = ByteBuffer.allocate(8192);
      for (int n = 0; n >= 0; ) {
        long left = (deadline - System.nanoTime()) / 1_000_000;
        if (left <= 0) throw new IOException("timeout");
        selector.select(left);
        selector.selectedKeys().clear();
        n = ch.read(buf.clear());
        if (n > 0) got.write(buf.array(), 0, n);
        if (got.size() > MAX_BODY + 16384) return new Answer(0, "", null);
      }
    }
    return parseHttp(got.toByteArray());
  }

  /** One whole HTTP/1.1 answer, framed by its content-length (the sidecar's are); anything else is no answer. */
  private static Answer parseHttp(byte[] raw) throws IOException {
    String text = new String(raw, StandardCharsets.ISO_8859_1);
    int end = text.indexOf("\r\n\r\n");
    String[] lines = end < 0 ? new String[0] : text.substring(0, end).split("\r\n");
    if (lines.length == 0 || !lines[0].matches("HTTP/1\\.[01] \\d{3}( .*)?")) throw new IOException("not HTTP");
    Map<String, String> headers = new HashMap<>();
    for (int i = 1; i < lines.length; i++) {
      int colon = lines[i].indexOf(':');
      if (colon <= 0 || headers.put(lines[i].substring(0, colon).trim().toLowerCase(), lines[i].substring(colon + 1).trim()) != null) throw new IOException("bad or repeated header");
    }
    String length = headers.get("content-length");
    if (length == null || !length.matches("\\d{1,9}") || headers.containsKey("transfer-encoding")) throw new IOException("not framed by content-length");
    if (raw.length - end - 4 != Integer.parseInt(length)) throw new IOException("incomplete body");
    byte[] body = java.util.Arrays.copyOfRange(raw, end + 4, raw.length);
    return new Answer(Integer.parseInt(lines[0].substring(9, 12)), headers.getOrDefault("content-type", ""), body.length > MAX_BODY ? null : body);
  }

  /**
   * The body as one JSON object whose values are strings or integers (Long), or null: not UTF-8,
   * not JSON, another shape, or a member named twice (two answers in one body are none).
   */
  static Map<String, Object> flatObject(byte[] bytes) {
    String s;
    try {
      s = StandardCharsets.UTF_8.newDecoder().decode(ByteBuffer.wrap(bytes)).toString();
    } catch (CharacterCodingException e) {
      return null;
    }
    int[] at = {skip(s, 0)};
    Map<String, Object> out = new HashMap<>();
    if (!eat(s, at, '{')) return null;
    if (!eat(s, at, '}')) {
      do {
        String name = string(s, at);
        if (name == null || !eat(s, at, ':')) return null;
        Object value = at[0] < s.length() && s.charAt(at[0]) == '"' ? string(s, at) : integer(s, at);
        if (value == null || out.put(name, value) != null) return null;
      } while (eat(s, at, ','));
      if (!eat(s, at, '}')) return null;
    }
    return at[0] == s.length() ? out : null;
  }

  private static int skip(String s, int i) {
    while (i < s.length() && " \t\r\n".indexOf(s.charAt(i)) >= 0) i++;
    return i;
  }

  private static boolean eat(String s, int[] at, char c) {
    if (at[0] >= s.length() || s.charAt(at[0]) != c) return false;
    at[0] = skip(s, at[0] + 1);
    return true;
  }

  private static String string(String s, int[] at) {
    if (at[0] >= s.length() || s.charAt(at[0]) != '"') return null;
    StringBuilder b = new StringBuilder();
    for (int i = at[0] + 1; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '"') {
        at[0] = skip(s, i + 1);
        return b.toString();
      }
      if (c < 0x20) return null;
      if (c != '\\') b.append(c);
      else if (++i < s.length() && "\"\\/bfnrt".indexOf(s.charAt(i)) >= 0) b.append("\"\\/\b\f\n\r\t".charAt("\"\\/bfnrt".indexOf(s.charAt(i))));
      else if (i + 4 < s.length() && s.charAt(i) == 'u' && s.substring(i + 1, i + 5).matches("[0-9a-fA-F]{4}")) b.append((char) Integer.parseInt(s.substring(i + 1, (i += 4) + 1), 16));
      else return null;
    }
    return null;
  }

  private static Long integer(String s, int[] at) {
    int i = at[0];
    int from = i;
    if (i < s.length() && s.charAt(i) == '-') i++;
    int digits = i;
    while (i < s.length() && Character.isDigit(s.charAt(i)) && s.charAt(i) < 128) i++;
    // Integers only: a fraction or an exponent, a leading zero, or more than 16 digits is no epoch ms.
    if (i == digits || i - digits > 16 || (s.charAt(digits) == '0' && i - digits > 1) || (i < s.length() && ".eE".indexOf(s.charAt(i)) >= 0)) return null;
    at[0] = skip(s, i);
    return Long.parseLong(s.substring(from, i));
  }

  private static String quote(String v) {
    StringBuilder b = new StringBuilder("\"");
    for (char c : v.toCharArray()) b.append(c == '"' || c == '\\' ? "\\" + c : c < 0x20 ? String.format("\\u%04x", (int) c) : String.valueOf(c));
    return b.append('"').toString();
  }

  public static void main(String[] args) {
    Result r = check(args[0], args[1], args[2], Duration.ofMillis(args.length > 3 ? Long.parseLong(args[3]) : 2000));
    System.out.println(r.allowed() ? "allowed " + r.validUntil() : "not_allowed " + r.kind() + " " + r.cause());
    System.exit(r.allowed() ? 0 : 1);
  }
}
