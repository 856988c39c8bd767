/// The transitions behind `Sheet.apply`, each called once its checks have passed.
extension Sheet {
    /// What is wrong with the action's own values whatever the sheet's phase and version (a
    /// detent this sheet was not configured with, the threshold as a resting place, a height or
    /// a screen name out of range), or nil. `apply` throws the same error; a store checks it
    /// before a version precondition, which it outranks.
    public func requestError(in action: SheetAction) -> SheetError? {
        do {
            switch action {
            case .drag(let target): _ = try landing(of: target)
            case .select(let target): _ = try restingIndex(of: target)
            case .resize(let height): try Self.checkContainerHeight(height)
            case .navigate(let step): try Self.checkStep(step)
            case .gesture, .confirm, .dismiss, .present, .changes: break
            }
            return nil
        } catch {
            return error
        }
    }

    func unknownDetent(_ d: Detent, field: String) -> SheetError {
        SheetError(code: .unknownDetent,
                   message: "\(d) is not one of this sheet's detents (\(configuration.detents.map(\.description).joined(separator: ", ")))",
                   field: field)
    }

    func landing(of target: DragTarget) throws(SheetError) -> Landing {
        switch target {
        case .closed:
            return .closed
        case .detent(let d):
            guard let i = configuration.index(of: d) else { throw unknownDetent(d, field: "to") }
            return .detent(i)
        }
    }

    /// The drag row of the conflict table: covered, then confirming, then dismissed.
    func requireDragAllowed() throws(SheetError) {
        switch phase {
        case .presented:
            guard child == nil else {
                throw SheetError(code: .sheetCovered, message: "another sheet is presented over this one: it takes no drag until that one goes away")
            }
        case .confirming:
            throw SheetError(code: .confirmationPending,
                             message: "a confirmation is pending: answer it with confirm before dragging")
        case .dismissed:
            throw SheetError(code: .sheetDismissed, message: "the sheet is dismissed: present it before dragging")
        }
    }

    /// `select`, `navigate`: allowed while presented (covered or not).
    func requirePresented(_ verb: String) throws(SheetError) {
        switch phase {
        case .presented: return
        case .confirming:
            throw SheetError(code: .confirmationPending, message: "a confirmation is pending: answer it with confirm before you \(verb)")
        case .dismissed:
            throw SheetError(code: .sheetDismissed, message: "the sheet is dismissed: present it before you \(verb)")
        }
    }

    /// The drag table, once the target is known and the phase allows it. An unprotected sheet
    /// (`protectWhen: hasChanges` with nothing to lose) lets every closing drag through.
    mutating func drag(to landing: Landing, attempted: DragTarget, gesture: GestureResolution?,
                       now: Timestamp) -> SheetOutcome {
        let storage = configuration.storage
        switch landing {
        case .detent(let i) where i == Int(detentIndex):
            return SheetOutcome(events: [])
        case .detent(let i) where i == storage.thresholdIndex:
            return isProtected ? intercept(attempted, gesture: gesture, now: now) : dismiss(.swipe, gesture: gesture, now: now)
        case .detent(let i):
            let from = detent
            detentIndex = UInt8(i)
            return record(.detentChanged(from: from, to: detent, by: .user), gesture: gesture, now: now)
        case .closed:
            switch storage.dismissPolicy {
            case .intercept where isProtected: return intercept(attempted, gesture: gesture, now: now)
            case .block where isProtected: return record(.dismissBlocked(attempted: .closed), gesture: gesture, now: now)
            case .allow, .intercept, .block: return dismiss(.swipe, gesture: gesture, now: now)
            }
        }
    }

    /// The sheet snaps back to where it was; with `confirm` the app now asks.
    mutating func intercept(_ attempted: DragTarget, gesture: GestureResolution?, now: Timestamp) -> SheetOutcome {
        if configuration.storage.interceptAction == .confirm { phase = .confirming }
        return record(.intercepted(attempted: attempted, restoredTo: detent), gesture: gesture, now: now)
    }

    /// Saving or discarding settles the changes; any other way out leaves `hasChanges` as it was.
    mutating func dismiss(_ reason: DismissReason, gesture: GestureResolution? = nil, now: Timestamp) -> SheetOutcome {
        phase = .dismissed
        dismissReason = reason
        if reason == .discarded || reason == .saved { hasChanges = false }
        return record(.dismissed(reason: reason, screen: stack[stack.count - 1]), gesture: gesture, now: now)
    }

    mutating func record(_ kind: SheetEvent.Kind, gesture: GestureResolution? = nil, now: Timestamp) -> SheetOutcome {
        let event = SheetEvent(seq: version + 1, at: now, kind: kind, gesture: gesture)
        appendToLog(event)
        return SheetOutcome(events: [event])
    }

    /// The app moves the sheet (UIKit's `selectedDetentIdentifier` in `animateChanges`).
    mutating func select(_ target: Detent, now: Timestamp) throws(SheetError) -> SheetOutcome {
        let i = try restingIndex(of: target)
        try requirePresented("select a detent")
        guard i != Int(detentIndex) else { return SheetOutcome(events: []) }
        let from = detent
        detentIndex = UInt8(i)
        return record(.detentChanged(from: from, to: detent, by: .app), now: now)
    }

    /// A detent the sheet can rest at: one of its own, not the threshold.
    func restingIndex(of target: Detent) throws(SheetError) -> Int {
        guard let i = configuration.index(of: target) else { throw unknownDetent(target, field: "detent") }
        guard i != configuration.storage.thresholdIndex else {
            throw SheetError(code: .invalidField, message: "\(target) is the threshold: the sheet never rests there", field: "detent")
        }
        return i
    }

    /// The container changed height: the detent stays by identity, everything re-resolves.
    mutating func resize(to height: Double, now: Timestamp) throws(SheetError) -> SheetOutcome {
        try Self.checkContainerHeight(height)
        let from = layout.containerHeight
        guard height != from else { return SheetOutcome(events: []) }
        let storage = configuration.storage
        layout = height == storage.layout.containerHeight
            ? storage.layout
            : ContainerLayout(detents: storage.detents, thresholdIndex: storage.thresholdIndex, containerHeight: height)
        return record(.resized(from: from, to: height), now: now)
    }

    static func checkContainerHeight(_ height: Double) throws(SheetError) {
        guard height.isFinite, SheetConfiguration.containerHeightRange.contains(height) else {
            throw SheetError(code: .invalidField,
                             message: "containerHeight must be a number of points from 1 to 10000, got \(DecimalText.canonical(height))",
                             field: "containerHeight")
        }
    }

    static func checkStep(_ step: NavigationStep) throws(SheetError) {
        switch step {
        case .push(let screen):
            if let problem = NavigationStack.problem(withName: screen) {
                throw SheetError(code: .invalidField, message: "push " + problem, field: "push")
            }
        case .pop(let count):
            guard count >= 1 else {
                throw SheetError(code: .invalidField, message: "pop takes a number of screens, at least 1, got \(count)", field: "pop")
            }
        }
    }

    /// A push or a pop: navigation inside the sheet, never a dismissal.
    mutating func navigate(_ step: NavigationStep, now: Timestamp) throws(SheetError) -> SheetOutcome {
        try Self.checkStep(step)
        switch step {
        case .push(let screen):
            try requirePresented("navigate")
            guard stack.count < NavigationStack.maximumDepth else {
                throw SheetError(code: .stackFull, message: "the navigation stack already holds its maximum of \(NavigationStack.maximumDepth) screens")
            }
            stack.append(screen)
            return record(.pushed(screen: screen, depth: stack.count), now: now)
        case .pop(let count):
            try requirePresented("navigate")
            guard count < stack.count else {
                throw SheetError(code: .cannotPop, message: "only \(stack.count - 1) screens stand above the root; cannot pop \(count)")
            }
            let removed = Array(stack.suffix(count).reversed())
            stack.removeLast(count)
            return record(.popped(screens: removed, depth: stack.count), now: now)
        }
    }

    // MARK: What a chain does to its sheets

    /// The sheet below was dismissed: this one goes first, dropping any pending question.
    mutating func dismissWithParent(now: Timestamp) -> [SheetEvent] {
        dismiss(.parentDismissed, now: now).events
    }

    mutating func cover(with child: SessionID, now: Timestamp) -> [SheetEvent] {
        self.child = child
        return record(.covered(child: child), now: now).events
    }

    mutating func uncover(_ reason: UncoverReason, now: Timestamp) -> [SheetEvent] {
        guard let child else { return [] }
        self.child = nil
        return record(.uncovered(child: child, reason: reason), now: now).events
    }
}
