/// How many changes the writer waits for before it begins a group's transaction (for at most
/// `SQLiteArchive.Options.gatherWindow`), from the groups before: a pure value, so its rule is
/// tested on its own.
///
/// The target is the largest group of late. While groups hold one change nobody else is
/// writing, and nothing waits: a lone client's change is committed as soon as it comes. Once
/// a group held several, the next waits for as many: closed-loop clients answered together come
/// back together, so a group of all of them fills at once; under full load changes trickle in as
/// fast as the request threads make them, and the window ends the wait with a group of what came
/// meanwhile (taken one by one, they made groups of one or two). The largest group decays by an
/// eighth with each smaller one, so a burst long gone stops setting the target.
struct GroupPacing: Equatable {
    /// The largest group of late.
    private(set) var ceiling = 0

    /// The queue length to wait for; 0: do not wait.
    var target: Int {
        ceiling >= 2 ? ceiling : 0
    }

    mutating func finished(group size: Int) {
        ceiling = max(size, ceiling * 7 / 8)
    }
}
