// What the content service does when it starts, before anything asks it for more: the content
// store is brought in line with the messages held, since the node may have been down while
// retention ran out.

extension ContentService {
    /// Removes content no held message refers to (so that none of it is resumed), then resumes
    /// the partial contents.
    func catchUp() async {
        await removeUnreferenced()
        await resumePartials()
    }
}
