import AccessControl

/// `sheetd keys new --tenant T --role R`: prints a fresh key (once: it is stored nowhere) and the
/// line of the keys file that accepts it.
enum KeysCommand {
    static let usage = "usage: sheetd keys new --tenant TENANT --role app|observer|operator\n"

    /// The exit status.
    static func run(_ arguments: ArraySlice<String>) -> Int32 {
        guard arguments.first == "new" else {
            printError("unknown keys command; " + usage)
            return 2
        }
        var tenant: String?
        var role: Role?
        var index = arguments.index(after: arguments.startIndex)
        while index < arguments.endIndex {
            let name = arguments[index]
            guard index + 1 < arguments.endIndex else {
                printError("\(name) needs a value; " + usage)
                return 2
            }
            let value = arguments[index + 1]
            switch name {
            case "--tenant":
                guard KeyFile.isValidTenant(Substring(value)) else {
                    printError("--tenant must be 1 to 64 of A-Z a-z 0-9 . _ -, not \"\(value)\"")
                    return 2
                }
                tenant = value
            case "--role":
                guard let parsed = Role(rawValue: value) else {
                    printError("--role must be one of app, observer, operator, not \"\(value)\"")
                    return 2
                }
                role = parsed
            default:
                printError("unknown flag \(name); " + usage)
                return 2
            }
            index += 2
        }
        guard let tenant, let role else {
            printError(usage)
            return 2
        }
        let key = NewKey(tenant: tenant, role: role)
        print("key: \(key.key)")
        print("keys-file line: \(key.line)")
        printError("the key is shown only this once: give it to the client; add the line to the --auth-keys file, then send sheetd SIGHUP")
        return 0
    }
}
