// The suite's driver for docs/clients/ConsentCheck.java: one JVM for every case instead of one per
// case (a JVM start is most of a case's time). Each line on stdin is one call of the documented
// function, `baseUrl<TAB>userReference<TAB>configKey<TAB>timeoutMs`; each answer is one line, what
// ConsentCheck's own main prints, after the exit code it would give: `code<TAB>line`.
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;

public final class ClientsHarness {
  public static void main(String[] args) throws IOException {
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
    for (String line; (line = in.readLine()) != null; ) {
      String[] f = line.split("\t", -1);
      ConsentCheck.Result r = ConsentCheck.check(f[0], f[1], f[2], Duration.ofMillis(Long.parseLong(f[3])));
      out.println((r.allowed() ? 0 : 1) + "\t" + (r.allowed() ? "allowed " + r.validUntil() : "not_allowed " + r.kind() + " " + r.cause()));
    }
  }
}
