// The floor of PushMedia's `GET /healthz` (bench/healthz.sh): a bare Hummingbird application
// answering the same route with the same bytes, and with `--log` one line per request (Hummingbird's
// own `LogRequestsMiddleware` at info, written to standard error), as PushMedia writes its log;
// `SERVER`: the `Server` header's value (PushMedia's).
//     healthz-floor PORT [--log] [SERVER]
import Foundation
import Hummingbird
import Logging

let arguments = CommandLine.arguments.dropFirst()
guard let port = arguments.first.flatMap({ Int($0) }) else {
    print("usage: healthz-floor PORT [--log] [SERVER]")
    exit(64)
}
var logger = Logger(label: "healthz-floor")
logger.logLevel = .info
let router = Router()
if arguments.contains("--log") { router.add(middleware: LogRequestsMiddleware(.info)) }
router.get("healthz") { _, _ in
    Response(
        status: .ok, headers: [.contentType: "application/json; charset=utf-8"],
        body: ResponseBody(byteBuffer: ByteBuffer(string: "{\"status\":\"ok\"}\n")))
}
let server = arguments.dropFirst().first { $0 != "--log" }
let app = Application(
    router: router, configuration: .init(address: .hostname("127.0.0.1", port: port), serverName: server),
    logger: logger)
try await app.runService()
