import SheetCore
import Testing

@Suite struct ConfigurationDefaults {
    @Test func nothingGiven() throws {
        let c = try SheetConfiguration()
        #expect(c.detents == [.large])
        #expect(c.defaultDetent == .large)
        #expect(c.thresholdDetent == nil)
        #expect(c.dismissPolicy == .allow)
        #expect(c.interceptAction == .confirm)
        #expect(c.containerHeight == 844)
        #expect(c.decelerationRate == .normal)
        #expect(SheetConfiguration.maximumDetents == 16)
    }

    @Test func thresholdMakesInterceptTheDefaultPolicy() throws {
        let c = try seedConfiguration()
        #expect(c.dismissPolicy == .intercept)
        #expect(c.interceptAction == .confirm)
        #expect(c.detents.map(\.description) == ["height:300", "medium", "large"])
    }

    @Test func defaultIsTheLargestDetent() throws {
        let c = try SheetConfiguration(detents: [.height(300), .medium, .fraction(0.25)])
        #expect(c.defaultDetent == .medium)
    }

    @Test func defaultIsTheLargestEvenWhenHeightsTie() throws {
        // height:1000 and large both resolve to 844; "large" sorts later, so it is the largest.
        let c = try SheetConfiguration(detents: [.large, .height(1000)])
        #expect(c.defaultDetent == .large)
    }

    @Test func defaultAndThresholdJoinTheSet() throws {
        let c = try SheetConfiguration(detents: [.medium], defaultDetent: .large, thresholdDetent: .height(100))
        #expect(c.detents == [.height(100), .medium, .large])
        #expect(c.defaultDetent == .large)
    }

    @Test func setIsDistinctAndSorted() throws {
        let c = try SheetConfiguration(detents: [.large, .medium, detent("height:1000"), .medium,
                                                  detent("fraction:.5"), detent("fraction:0.50")])
        #expect(c.detents.map(\.description) == ["fraction:0.5", "medium", "height:1000", "large"])
    }

    @Test func sortFollowsTheContainer() throws {
        // In a 500-point container height:300 (300) is above medium (250).
        let c = try SheetConfiguration(detents: [.height(300), .medium, .large], containerHeight: 500)
        #expect(c.detents == [.medium, .height(300), .large])
    }

    @Test(arguments: DecelerationRate.allCases)
    func decelerationRates(rate: DecelerationRate) throws {
        let c = try SheetConfiguration(decelerationRate: rate)
        #expect(c.decelerationRate == rate)
        #expect(rate.value == (rate == .normal ? 0.998 : 0.99))
        #expect(abs(rate.projectionFactor - rate.value / (1 - rate.value)) < 1e-9)
    }

    @Test(arguments: [1.0, 844, 10_000, 1.5, 9_999.25])
    func containerHeightsInRange(height: Double) throws {
        #expect(try SheetConfiguration(containerHeight: height).containerHeight == height)
    }

    @Test(arguments: [DismissPolicy.intercept, .block])
    func thresholdWithInterceptOrBlock(policy: DismissPolicy) throws {
        #expect(try seedConfiguration(dismissPolicy: policy).dismissPolicy == policy)
    }

    @Test(arguments: DismissPolicy.allCases)
    func anyPolicyWithoutThreshold(policy: DismissPolicy) throws {
        #expect(try SheetConfiguration(detents: [.medium, .large], dismissPolicy: policy).dismissPolicy == policy)
    }

    @Test func sixteenDetentsFit() throws {
        let sixteen = (1...16).map { Detent.height(Double($0 * 10)) }
        #expect(try SheetConfiguration(detents: sixteen).detents.count == 16)
    }
}

/// One row per configuration rule: the arguments, the code and the field it must name.
struct RuleCase: Sendable, CustomTestStringConvertible {
    var name: String
    var make: @Sendable () throws(ConfigurationError) -> SheetConfiguration
    var code: ConfigurationError.Code
    var field: String
    var testDescription: String { name }
}

@Suite struct ConfigurationRules {
    static let cases: [RuleCase] = [
        RuleCase(name: "empty detents", make: { () throws(ConfigurationError) in try SheetConfiguration(detents: []) },
                 code: .emptyDetents, field: "detents"),
        RuleCase(name: "17 detents", make: { () throws(ConfigurationError) in
            try SheetConfiguration(detents: (1...17).map { .height(Double($0)) }) },
                 code: .tooManyDetents, field: "detents"),
        RuleCase(name: "16 detents plus a new default", make: { () throws(ConfigurationError) in
            try SheetConfiguration(detents: (1...16).map { .height(Double($0)) }, defaultDetent: .large) },
                 code: .tooManyDetents, field: "detents"),
        RuleCase(name: "15 detents plus default plus threshold", make: { () throws(ConfigurationError) in
            try SheetConfiguration(detents: (10...24).map { .height(Double($0 * 10)) }, defaultDetent: .large,
                                   thresholdDetent: .height(5)) },
                 code: .tooManyDetents, field: "detents"),
        RuleCase(name: "threshold above another detent", make: { () throws(ConfigurationError) in
            try SheetConfiguration(detents: [.large, .height(300)], thresholdDetent: .medium) },
                 code: .thresholdNotLowest, field: "thresholdDetent"),
        RuleCase(name: "threshold ties another detent", make: { () throws(ConfigurationError) in
            try SheetConfiguration(detents: [.large, .medium], thresholdDetent: .fraction(0.5)) },
                 code: .thresholdNotLowest, field: "thresholdDetent"),
        RuleCase(name: "threshold clamps to the same height as large", make: { () throws(ConfigurationError) in
            try SheetConfiguration(detents: [.large], defaultDetent: .large, thresholdDetent: .height(2000)) },
                 code: .thresholdNotLowest, field: "thresholdDetent"),
        RuleCase(name: "threshold is the given default", make: { () throws(ConfigurationError) in
            try SheetConfiguration(detents: [.large, .medium], defaultDetent: .medium, thresholdDetent: .medium) },
                 code: .thresholdIsDefault, field: "thresholdDetent"),
        RuleCase(name: "threshold is the only detent, so the default", make: { () throws(ConfigurationError) in
            try SheetConfiguration(detents: [.height(300)], thresholdDetent: .height(300)) },
                 code: .thresholdIsDefault, field: "thresholdDetent"),
        RuleCase(name: "threshold with allow", make: { () throws(ConfigurationError) in
            try SheetConfiguration(detents: [.large], thresholdDetent: .height(300), dismissPolicy: .allow) },
                 code: .thresholdWithAllow, field: "dismissPolicy"),
        RuleCase(name: "container 0", make: { () throws(ConfigurationError) in try SheetConfiguration(containerHeight: 0) },
                 code: .containerHeightOutOfRange, field: "containerHeight"),
        RuleCase(name: "container 0.5", make: { () throws(ConfigurationError) in try SheetConfiguration(containerHeight: 0.5) },
                 code: .containerHeightOutOfRange, field: "containerHeight"),
        RuleCase(name: "container -844", make: { () throws(ConfigurationError) in try SheetConfiguration(containerHeight: -844) },
                 code: .containerHeightOutOfRange, field: "containerHeight"),
        RuleCase(name: "container 10000.5", make: { () throws(ConfigurationError) in try SheetConfiguration(containerHeight: 10_000.5) },
                 code: .containerHeightOutOfRange, field: "containerHeight"),
        RuleCase(name: "container nan", make: { () throws(ConfigurationError) in try SheetConfiguration(containerHeight: .nan) },
                 code: .containerHeightOutOfRange, field: "containerHeight"),
        RuleCase(name: "container inf", make: { () throws(ConfigurationError) in try SheetConfiguration(containerHeight: .infinity) },
                 code: .containerHeightOutOfRange, field: "containerHeight"),
        RuleCase(name: "built detent out of range", make: { () throws(ConfigurationError) in
            try SheetConfiguration(detents: [.fraction(2)]) },
                 code: .invalidDetent, field: "detents"),
        RuleCase(name: "built default out of range", make: { () throws(ConfigurationError) in
            try SheetConfiguration(defaultDetent: .height(.nan)) },
                 code: .invalidDetent, field: "defaultDetent"),
        RuleCase(name: "built threshold out of range", make: { () throws(ConfigurationError) in
            try SheetConfiguration(thresholdDetent: .height(-1)) },
                 code: .invalidDetent, field: "thresholdDetent"),
        // The first failing rule, in field order, wins.
        RuleCase(name: "empty detents before bad container", make: { () throws(ConfigurationError) in
            try SheetConfiguration(detents: [], containerHeight: 0) },
                 code: .emptyDetents, field: "detents"),
        RuleCase(name: "threshold before policy", make: { () throws(ConfigurationError) in
            try SheetConfiguration(detents: [.large], defaultDetent: .large, thresholdDetent: .large, dismissPolicy: .allow) },
                 code: .thresholdIsDefault, field: "thresholdDetent"),
        RuleCase(name: "policy before container", make: { () throws(ConfigurationError) in
            try SheetConfiguration(thresholdDetent: .height(10), dismissPolicy: .allow, containerHeight: 0) },
                 code: .thresholdWithAllow, field: "dismissPolicy"),
    ]

    @Test(arguments: cases)
    func rule(_ row: RuleCase) {
        do {
            let c = try row.make()
            Issue.record("expected \(row.code), got \(c)")
        } catch {
            #expect(error.code == row.code)
            #expect(error.field == row.field)
            #expect(!error.message.isEmpty)
        }
    }
}
