// Verify that a webhook event came from the pod's consent sidecar. Java 17, the JDK only.
//
//   java VerifyForward.java 8080 /var/run/secrets/consent-sidecar/app-signing-secret
import com.sun.net.httpserver.HttpServer;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.time.Instant;
import java.util.HexFormat;
import java.util.List;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

public final class VerifyForward {
  /**
   * The body of a genuine, fresh forward of the sidecar (UTF-8 JSON: parse it with your JSON
   * library); a SecurityException otherwise. timestamps, signatures: every value of the
   * x-consent-sidecar-timestamp and x-consent-sidecar-signature headers; rawBody: the body as
   * received, before any parsing; secrets: the lines of the app signing secret file (rotation).
   */
  public static String verify(List<String> timestamps, List<String> signatures, byte[] rawBody, List<String> secrets, long toleranceS) throws GeneralSecurityException {
    if (timestamps == null || signatures == null || timestamps.size() != 1 || signatures.size() != 1) throw new SecurityException("signature headers missing or repeated");
    String timestamp = timestamps.get(0);
    String signature = signatures.get(0);
    if (!timestamp.matches("[0-9]{1,12}") || !signature.matches("v1=[0-9a-f]{64}")) throw new SecurityException("malformed signature headers");
    long age = Instant.now().getEpochSecond() - Long.parseLong(timestamp);
    if (age > toleranceS || -age > toleranceS) throw new SecurityException("timestamp outside the tolerance");
    byte[] given = HexFormat.of().parseHex(signature.substring(3));
    boolean matched = false;
    for (String secret : secrets) { // every secret is compared, in constant time, even after a match
      Mac mac = Mac.getInstance("HmacSHA256");
      mac.init(new SecretKeySpec(secret.getBytes(StandardCharsets.UTF_8), "HmacSHA256"));
      mac.update((timestamp + ".").getBytes(StandardCharsets.UTF_8));
      matched = MessageDigest.isEqual(mac.doFinal(rawBody), given) || matched;
    }
    if (!matched) throw new SecurityException("signature mismatch");
    try {
      return StandardCharsets.UTF_8.newDecoder().decode(ByteBuffer.wrap(rawBody)).toString();
    } catch (CharacterCodingException e) {
      throw new SecurityException("not UTF-8");
    }
  }

  public static void main(String[] args) throws Exception {
    List<String> secrets = Files.readAllLines(Path.of(args[1])).stream().map(String::strip).filter(s -> !s.isEmpty() && !s.startsWith("#")).toList();
    HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", Integer.parseInt(args[0])), 0);
    server.createContext("/", exchange -> {
      byte[] raw = exchange.getRequestBody().readAllBytes();
      int status;
      try {
        String event = verify(exchange.getRequestHeaders().get("x-consent-sidecar-timestamp"), exchange.getRequestHeaders().get("x-consent-sidecar-signature"), raw, secrets, 300);
        System.out.println("verified " + event.length() + " characters"); // parse and handle it, idempotent by its "id"
        status = 204;
      } catch (SecurityException | GeneralSecurityException e) {
        System.out.println("refused " + e.getMessage());
        status = 401;
      }
      exchange.sendResponseHeaders(status, -1);
      exchange.close();
    });
    server.start();
    System.out.println("listening " + server.getAddress().getPort());
  }
}
