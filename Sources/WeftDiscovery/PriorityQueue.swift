/// A binary min-heap: the least element in O(1), adding and taking it in O(log n). (Weft's
/// discovery module depends on nothing else for this; swift-collections' `Heap` is not one of
/// its dependencies.)
struct PriorityQueue<Element: Comparable & Sendable>: Sendable {
    private var elements: [Element]

    /// The queue of `elements`, in O(n).
    init(_ elements: [Element] = []) {
        self.elements = elements
        for index in stride(from: elements.count / 2 - 1, through: 0, by: -1) { siftDown(index) }
    }

    var count: Int { elements.count }

    /// The least element, nil if there is none.
    var min: Element? { elements.first }

    mutating func insert(_ element: Element) {
        elements.append(element)
        var child = elements.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard elements[child] < elements[parent] else { break }
            elements.swapAt(child, parent)
            child = parent
        }
    }

    /// Removes and returns the least element, nil if there is none.
    mutating func popMin() -> Element? {
        guard !elements.isEmpty else { return nil }
        elements.swapAt(0, elements.count - 1)
        let least = elements.removeLast()
        siftDown(0)
        return least
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var least = parent
            if left < elements.count, elements[left] < elements[least] { least = left }
            if right < elements.count, elements[right] < elements[least] { least = right }
            guard least != parent else { return }
            elements.swapAt(parent, least)
            parent = least
        }
    }
}
